package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
)

// daemon is one run of `allocd serve` on a data folder.
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const e2eSession = 2 * time.Second

// startDaemon runs allocd serve on dataDir with the plugins of pluginsDir, and waits until it
// answers /readyz.
func startDaemon(t *testing.T, dataDir, pluginsDir string, extra ...string) *daemon {
	t.Helper()
	d := launchDaemon(t, dataDir, pluginsDir, extra...)
	d.waitReady(2 * time.Minute) // the first run compiles the plugins
	return d
}

// waitReady waits until the daemon answers /readyz with 200.
func (d *daemon) waitReady(within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	// The daemon listens before its plugins are loaded, and answers /readyz 503 until then.
	for code := d.do("GET", "/readyz", "", nil); code != http.StatusOK; code = d.do("GET", "/readyz", "", nil) {
		if time.Now().After(deadline) {
			d.t.Fatalf("/readyz answered %d", code)
		}
		select {
		case <-d.exited:
			d.t.Fatalf("allocd serve exited: %v\n%s", d.err, d.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// launchDaemon runs allocd serve and waits until it listens (it may not be ready yet).
func launchDaemon(t *testing.T, dataDir, pluginsDir string, extra ...string) *daemon {
	t.Helper()
	flags := append([]string{"--data-dir", dataDir, "--plugins-dir", pluginsDir,
		"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache"),
		"--session-timeout", e2eSession.String(), "--debounce", "50ms",
		"--log-format", "json", "--log-level", "debug"}, extra...)
	return execDaemon(t, flags, nil)
}

// execDaemon starts `allocd serve` on a free port with flags, after prepare (when not nil) has
// set up the command (its folder, its environment), and returns once it listens. The test's
// cleanup kills it and prints its log when the test failed.
func execDaemon(t *testing.T, flags []string, prepare func(*exec.Cmd)) *daemon {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile}, flags...)
	d := &daemon{t: t, stderr: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(wasmbuild.Allocd(t), args...)
	d.cmd.Stderr = d.stderr
	if prepare != nil {
		prepare(d.cmd)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.exited
		if t.Failed() {
			t.Logf("allocd serve log:\n%s", d.stderr.String())
		}
	})
	deadline := time.Now().Add(3 * time.Minute) // the first run compiles the plugins
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			d.url = "http://" + strings.TrimSpace(string(b))
			break
		}
		select {
		case <-d.exited:
			t.Fatalf("allocd serve exited: %v\n%s", d.err, d.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocd serve wrote no address in time\n%s", d.stderr.String())
		}
	}
	return d
}

// do sends a request and decodes the JSON answer into out; it returns the status code.
func (d *daemon) do(method, path, body string, out any) int {
	d.t.Helper()
	code, b := d.raw(method, path, body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return code
}

func (d *daemon) raw(method, path, body string) (int, []byte) {
	d.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.url+path, r)
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// must sends a request that must answer want.
func (d *daemon) must(want int, method, path, body string, out any) {
	d.t.Helper()
	if code, b := d.raw(method, path, body); code != want {
		d.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	} else if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatal(err)
		}
	}
}

type assignment struct {
	Generations map[string]int64       `json:"generations"`
	Assignment  map[string][]abi.Queue `json:"assignment"`
}

func (d *daemon) heartbeat(group, cid string, topics ...string) assignment {
	d.t.Helper()
	body, _ := json.Marshal(map[string]any{"cid": cid, "topics": topics, "instanceId": "", "labels": map[string]string{}})
	var a assignment
	d.must(http.StatusOK, "POST", "/v1/groups/"+group+"/heartbeat", string(body), &a)
	return a
}

// poll long-polls cid's assignment of topic for a generation newer than after.
func (d *daemon) poll(group, cid, topic string, after int64) assignment {
	d.t.Helper()
	var a assignment
	d.must(http.StatusOK, "GET", fmt.Sprintf("/v1/groups/%s/assignment?cid=%s&topic=%s&after=%d&wait=20s", group, cid, topic, after), "", &a)
	if a.Generations[topic] <= after {
		d.t.Fatalf("%s's long-poll for a generation after %d timed out at %d", cid, after, a.Generations[topic])
	}
	return a
}

// beat keeps members alive in the background until the test ends or stop is called.
func (d *daemon) beat(group string, cids ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(e2eSession / 5)
		defer t.Stop()
		for {
			for _, cid := range cids {
				body, _ := json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}})
				if resp, err := http.Post(d.url+"/v1/groups/"+group+"/heartbeat", "application/json", bytes.NewReader(body)); err == nil {
					resp.Body.Close()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	stop = func() { cancel(); wg.Wait() }
	d.t.Cleanup(stop)
	return stop
}

// native computes what a built-in strategy gives each of cids (sorted) over n queues of T.
func native(strategy func([]int, int, int, int) []int, n int, cids ...string) map[string][]int32 {
	out := map[string][]int32{}
	for i, cid := range cids {
		for _, q := range strategy(nil, n, len(cids), i) {
			out[cid] = append(out[cid], int32(q))
		}
	}
	return out
}

func ids(qs []abi.Queue) []int32 {
	out := []int32{}
	for _, q := range qs {
		out = append(out, q.QueueID)
	}
	return out
}

// checkAssignment long-polls every member past after and compares its queues with want.
func (d *daemon) checkAssignment(after int64, want map[string][]int32) int64 {
	d.t.Helper()
	var gen int64
	for cid, w := range want {
		a := d.poll("g", cid, "T", after)
		if got := ids(a.Assignment["T"]); !slices.Equal(got, w) {
			d.t.Errorf("%s has queues %v, want %v", cid, got, w)
		}
		gen = a.Generations["T"]
	}
	return gen
}

func TestServeAssignsAndRebinds(t *testing.T) {
	config := filepath.Join(t.TempDir(), "allocd.json")
	os.WriteFile(config, []byte(`{"topics":{"T":{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}]}},
		"groups":{"g":{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}}}`), 0o644)
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t), "--config", config)

	cids := []string{"10.0.0.1@1", "10.0.0.2@1", "10.0.0.3@1"}
	for _, cid := range cids {
		d.heartbeat("g", cid, "T")
	}
	d.beat("g", cids...)
	gen := d.checkAssignment(0, native(averagely.Allocate, 8, cids...))

	// A long-poll waiting for the next generation wakes when the binding changes.
	woke := make(chan assignment, 1)
	go func() {
		var a assignment
		d.do("GET", fmt.Sprintf("/v1/groups/g/assignment?cid=%s&topic=T&after=%d&wait=20s", cids[0], gen), "", &a)
		woke <- a
	}()
	time.Sleep(200 * time.Millisecond)
	d.must(http.StatusOK, "PUT", "/v1/groups/g", `{"strategy":"circle","config":{},"model":"clustering","delivery":"queue"}`, nil)
	select {
	case a := <-woke:
		if a.Generations["T"] != gen+1 {
			t.Fatalf("the waiting long-poll woke with generation %d, want %d", a.Generations["T"], gen+1)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting long-poll did not wake")
	}
	gen = d.checkAssignment(gen, native(circle.Allocate, 8, cids...))

	// hash: every queue given once, to the three members.
	d.must(http.StatusOK, "PUT", "/v1/groups/g", `{"strategy":"hash","config":{"vnodes":"10"}}`, nil)
	seen := map[int32]bool{}
	for _, cid := range cids {
		for _, q := range d.poll("g", cid, "T", gen).Assignment["T"] {
			if seen[q.QueueID] {
				t.Fatalf("queue %d given twice under hash", q.QueueID)
			}
			seen[q.QueueID] = true
		}
	}
	if len(seen) != 8 {
		t.Fatalf("hash gave %d of 8 queues", len(seen))
	}

	var status struct {
		Strategy string
		Members  []struct{ CID string }
		Topics   map[string]struct {
			Generation int64
			Assignment map[string][]abi.Queue
			Plugin     string
		}
	}
	d.must(http.StatusOK, "GET", "/v1/groups/g", "", &status)
	if status.Strategy != "hash" || len(status.Members) != 3 || status.Topics["T"].Plugin != "hash" || len(status.Topics["T"].Assignment) != 3 {
		t.Fatalf("group status: %+v", status)
	}
	_, metrics := d.raw("GET", "/metrics", "")
	for _, want := range []string{`allocd_group_members{group="g"} 3`, `allocd_allocate_calls_total{plugin="circle"}`, `allocd_plugin_reloads_total{plugin="averagely",result="ok"} 1`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The serving plugins' own counters: hash has answered calls, from a live instance with
	// some linear memory, and never trapped.
	for _, want := range []string{
		`(?m)^allocd_plugin_calls_total\{plugin="hash"\} [1-9]`,
		`(?m)^allocd_plugin_instances\{plugin="hash"\} [1-9]`,
		`(?m)^allocd_plugin_memory_bytes\{plugin="hash"\} [1-9]`,
		`(?m)^allocd_plugin_traps_total\{plugin="hash"\} 0$`,
	} {
		if !regexp.MustCompile(want).Match(metrics) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var plugins struct {
		Plugins []struct{ Name, ActiveHash string }
	}
	if d.must(http.StatusOK, "GET", "/v1/plugins", "", &plugins); len(plugins.Plugins) < 3 {
		t.Fatalf("plugins: %+v", plugins)
	}
}

func TestServeDropsASilentMember(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	d.heartbeat("g", "c1", "T")
	d.heartbeat("g", "c2", "T")
	d.beat("g", "c1")
	gen := d.checkAssignment(0, map[string][]int32{"c1": {0, 1}, "c2": {2, 3}})
	// c2 falls silent: after the session timeout it is dropped and c1 gets everything.
	start := time.Now()
	a := d.poll("g", "c1", "T", gen)
	if got := ids(a.Assignment["T"]); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("c1 has %v after c2 went silent", got)
	}
	if took := time.Since(start); took < e2eSession/2 || took > 3*e2eSession {
		t.Fatalf("c2 was dropped after %v; the session timeout is %v", took, e2eSession)
	}
	d.must(http.StatusNotFound, "GET", "/v1/groups/g/assignment?cid=c2", "", nil)
}

func TestServeKeepsStateAcrossKill(t *testing.T) {
	data := t.TempDir()
	plugins := wasmbuild.BuiltinPlugins(t)
	d := startDaemon(t, data, plugins)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-b","readQueues":2,"writeQueues":2},{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"hash","config":{"vnodes":"7"}}`, nil)
	d.heartbeat("g", "c1", "T")
	d.heartbeat("g", "c2", "T")
	stop := d.beat("g", "c1", "c2")
	a := d.poll("g", "c1", "T", 0)
	var topicBefore, groupBefore map[string]any
	d.must(http.StatusOK, "GET", "/v1/topics/T", "", &topicBefore)
	d.must(http.StatusOK, "GET", "/v1/groups/g", "", &groupBefore)
	stop()
	d.cmd.Process.Kill() // kill -9: no chance to flush anything
	<-d.exited

	d = startDaemon(t, data, plugins)
	var topicAfter, groupAfter map[string]any
	d.must(http.StatusOK, "GET", "/v1/topics/T", "", &topicAfter)
	d.must(http.StatusOK, "GET", "/v1/groups/g", "", &groupAfter)
	if fmt.Sprint(topicAfter) != fmt.Sprint(topicBefore) {
		t.Fatalf("topic after kill -9: %v, before: %v", topicAfter, topicBefore)
	}
	for _, k := range []string{"strategy", "config", "model", "delivery"} {
		if fmt.Sprint(groupAfter[k]) != fmt.Sprint(groupBefore[k]) {
			t.Errorf("group %s after kill -9: %v, before: %v", k, groupAfter[k], groupBefore[k])
		}
	}
	// The members come back within the grace and find the same generation and queues.
	b := d.heartbeat("g", "c1", "T")
	if b.Generations["T"] != a.Generations["T"] || !slices.Equal(ids(b.Assignment["T"]), ids(a.Assignment["T"])) {
		t.Fatalf("after the restart c1 has %v at %d, before %v at %d", ids(b.Assignment["T"]), b.Generations["T"], ids(a.Assignment["T"]), a.Generations["T"])
	}
	d.heartbeat("g", "c2", "T")
	d.beat("g", "c1", "c2")
	time.Sleep(e2eSession + 500*time.Millisecond) // past the grace
	if c := d.heartbeat("g", "c1", "T"); c.Generations["T"] != a.Generations["T"] {
		t.Fatalf("a restart with every member back changed the generation: %d, was %d", c.Generations["T"], a.Generations["T"])
	}
}

func TestServeShutsDownOnSIGTERM(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	d.heartbeat("g", "c1", "T")
	gen := d.poll("g", "c1", "T", 0).Generations["T"]
	polled := make(chan int, 1)
	go func() {
		code := d.do("GET", fmt.Sprintf("/v1/groups/g/assignment?cid=c1&after=%d&wait=60s", gen), "", nil)
		polled <- code
	}()
	// An open page of the web view streams until the shutdown ends it.
	streamed := make(chan error, 1)
	go func() {
		resp, err := http.Get(d.url + "/ui/events?page=/ui/groups/g")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		streamed <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("allocd did not exit within 15 s of SIGTERM")
	}
	if d.err != nil {
		t.Fatalf("allocd exited with %v after SIGTERM\n%s", d.err, d.stderr.String())
	}
	if code := <-polled; code != http.StatusOK {
		t.Fatalf("the waiting long-poll got %d during shutdown", code)
	}
	if err := <-streamed; err != nil {
		t.Fatalf("the web view's stream ended with %v at shutdown, want its end", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v with a long-poll waiting and a page streaming", took)
	}
	if !strings.Contains(d.stderr.String(), "allocd stopped") {
		t.Fatalf("no clean stop in the log:\n%s", d.stderr.String())
	}
}

// --ui=off serves no page; the default (read) serves them, and / leads to them.
func TestServeUIModes(t *testing.T) {
	off := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t), "--ui", "off")
	var e struct{ Error string }
	if code := off.do("GET", "/ui/groups", "", &e); code != http.StatusNotFound || !strings.Contains(e.Error, "no such endpoint") {
		t.Fatalf("--ui=off: GET /ui/groups: %d %q, want the API's 404", code, e.Error)
	}
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	resp, err := http.Get(d.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/groups" || !strings.Contains(string(body), "read-only") {
		t.Fatalf("GET / on the default --ui: %d at %s, want the read-only groups page", resp.StatusCode, resp.Request.URL.Path)
	}
}

func TestServeReloadsAReplacedPlugin(t *testing.T) {
	plugins := t.TempDir()
	builtin := wasmbuild.BuiltinPlugins(t)
	for _, name := range []string{"averagely", "circle"} {
		b, err := os.ReadFile(filepath.Join(builtin, name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plugins, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, t.TempDir(), plugins)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	d.heartbeat("g", "c1", "T")
	d.heartbeat("g", "c2", "T")
	d.beat("g", "c1", "c2")
	gen := d.checkAssignment(0, map[string][]int32{"c1": {0, 1}, "c2": {2, 3}})

	// Replace averagely.wasm with circle's bytes, the way a deploy does: write, then rename.
	b, err := os.ReadFile(filepath.Join(plugins, "circle.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(plugins, ".averagely.wasm.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(plugins, "averagely.wasm")); err != nil {
		t.Fatal(err)
	}
	d.checkAssignment(gen, map[string][]int32{"c1": {0, 2}, "c2": {1, 3}})
	var st struct {
		ActiveHash string
		Reloads    int
		// The daemon's calls to the plugin, and the harness's report on the version serving.
		Allocate *struct{ Calls, Errors int64 }
		Harness  *struct {
			Hash   string
			Passed bool
			Checks []struct{ Name, Status string }
		}
	}
	d.must(http.StatusOK, "GET", "/v1/plugins/averagely", "", &st)
	var circle struct{ ActiveHash string }
	d.must(http.StatusOK, "GET", "/v1/plugins/circle", "", &circle)
	if st.ActiveHash != circle.ActiveHash || st.Reloads != 1 {
		t.Fatalf("averagely after the replacement: %+v (circle's hash %s)", st, circle.ActiveHash)
	}
	if st.Allocate == nil || st.Allocate.Calls < 2 || st.Allocate.Errors != 0 {
		t.Errorf("averagely's allocation calls: %+v, want 2 or more (one per generation), no error", st.Allocate)
	}
	if h := st.Harness; h == nil || h.Hash != st.ActiveHash || !h.Passed || len(h.Checks) == 0 {
		t.Errorf("averagely's harness report: %+v, want the new version's, passed", h)
	}
}

// TestServeTriesAgainAPluginRefusedForItsDeadline: a plugin whose start runs out of the call
// deadline (here a deadline no start can meet) is refused with the deadline named, and
// /v1/plugins says when it will be tried again, as it would for a good version on a machine too
// busy to start it in time.
func TestServeTriesAgainAPluginRefusedForItsDeadline(t *testing.T) {
	plugins := t.TempDir()
	b, err := os.ReadFile(filepath.Join(wasmbuild.BuiltinPlugins(t), "averagely.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// A name of no built-in, so that no built-in is tried after it.
	if err := os.WriteFile(filepath.Join(plugins, "spread.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), plugins, "--plugin-timeout", "1us")
	var st struct {
		ActiveHash, LastError, Warning string
		LastAttempt, RetryAt           time.Time
	}
	d.must(http.StatusOK, "GET", "/v1/plugins/spread", "", &st)
	if st.ActiveHash != "" || !strings.Contains(st.LastError, "deadline") {
		t.Fatalf("a plugin under a 1µs deadline: %+v, want it refused for the deadline", st)
	}
	if wait := st.RetryAt.Sub(st.LastAttempt); wait < 2*time.Second || wait > time.Minute || !strings.Contains(st.Warning, "it is tried again at") {
		t.Fatalf("a plugin refused for its deadline: %+v, want a retry due 2 s or more after the attempt, in the warning too", st)
	}
}
