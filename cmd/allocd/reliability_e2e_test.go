package main_test

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/allocd/allocd/internal/wasmbuild"
)

// End-to-end tests of faults found by probing the released binary from outside: hostile plugin
// files, a replaced plugin folder, damaged caches and databases, restarts with a bad file.

// pluginCopy is a private folder holding copies of the built-in plugins, for a test that changes
// the plugin folder.
func pluginCopy(t *testing.T) string {
	t.Helper()
	src := wasmbuild.BuiltinPlugins(t)
	dst := filepath.Join(t.TempDir(), "plugins")
	copyPlugins(t, src, dst)
	return dst
}

func copyPlugins(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(src, "*.wasm"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pluginStatus is the part of /v1/plugins/{name} these tests read.
type pluginStatus struct {
	Name       string `json:"name"`
	ActiveHash string `json:"activeHash"`
	LastError  string `json:"lastError"`
	Rejected   *struct {
		Hash   string `json:"hash"`
		Reason string `json:"reason"`
	} `json:"rejected"`
	Kept    bool   `json:"kept"`
	Warning string `json:"warning"`
	History []struct {
		Kind string `json:"kind"`
		Hash string `json:"hash"`
	} `json:"history"`
}

func (d *daemon) plugin(name string) (pluginStatus, int) {
	d.t.Helper()
	var s pluginStatus
	code := d.do("GET", "/v1/plugins/"+name, "", &s)
	return s, code
}

// eventually retries cond every 50 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchHealth asks /healthz every 100 ms until stop, and reports the slowest answer.
func (d *daemon) watchHealth() (stop func() time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var slowest time.Duration
	client := &http.Client{Timeout: 5 * time.Second}
	wg.Go(func() {
		for {
			start := time.Now()
			resp, err := client.Get(d.url + "/healthz")
			took := time.Since(start)
			if err != nil {
				took = time.Hour
			} else {
				resp.Body.Close()
			}
			slowest = max(slowest, took)
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return func() time.Duration { close(done); wg.Wait(); return slowest }
}

// A file of zeros behind a wasm header once made the module rewriter allocate ~100 bytes per
// byte (5 GB for 200 MB), stalling heartbeats and /healthz. Now a file over the size limit is
// refused without being read, one under it is refused at the section limit, both quickly, and
// the daemon stays responsive and small.
func TestServeRefusesCraftedPluginFiles(t *testing.T) {
	plugins := pluginCopy(t)
	d := startDaemon(t, t.TempDir(), plugins)
	pid := d.cmd.Process.Pid
	before := rss(pid)
	stop := d.watchHealth()
	header := []byte("\x00asm\x01\x00\x00\x00")
	for _, c := range []struct {
		name string
		size int
		want string
	}{
		{"big", 200 << 20, "more than the limit of 16777216"},
		{"zeros", 15 << 20, "more than 1024 sections"},
	} {
		f, err := os.Create(filepath.Join(plugins, c.name+".wasm.tmp"))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(header)
		if err := f.Truncate(int64(c.size)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		start := time.Now()
		os.Rename(f.Name(), filepath.Join(plugins, c.name+".wasm"))
		var s pluginStatus
		eventually(t, 10*time.Second, c.name+" rejected", func() bool {
			var code int
			s, code = d.plugin(c.name)
			return code == http.StatusOK && s.LastError != ""
		})
		if !strings.Contains(s.LastError, c.want) {
			t.Errorf("%s: lastError %q, want it to name %q", c.name, s.LastError, c.want)
		}
		t.Logf("%s (%d MB) rejected after %v: %s", c.name, c.size>>20, time.Since(start).Round(time.Millisecond), s.LastError)
	}
	if slowest := stop(); slowest > time.Second {
		t.Errorf("/healthz took up to %v while the files were read", slowest)
	}
	if grown := rss(pid) - before; grown > 256<<20 {
		t.Errorf("resident memory grew by %d MB", grown>>20)
	}
	// Heartbeats still work.
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"b","readQueues":4,"writeQueues":4}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}`, nil)
	d.heartbeat("g", "c1", "T")
}

// stop ends the daemon with SIGTERM and waits for it to exit cleanly.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.t.Fatal("allocd did not exit within 20 s of SIGTERM")
	}
	if d.err != nil {
		d.t.Fatalf("allocd exited with %v\n%s", d.err, d.stderr.String())
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var _ = fmt.Sprintf

// serveOnce runs allocd serve expecting it to refuse to start; it returns the exit code and
// what it wrote.
func serveOnce(t *testing.T, dataDir string, extra ...string) (int, string) {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
		"--plugins-dir", wasmbuild.BuiltinPlugins(t), "--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache")}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wasmbuild.Allocd(t), args...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// A damaged database page made allocd serve panic with a bbolt stack trace; an empty file made
// it start with nothing. Both now end with one message naming the file and what to do.
func TestServeRefusesDamagedStore(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, wasmbuild.BuiltinPlugins(t))
	for i := range 40 {
		d.must(http.StatusCreated, "PUT", fmt.Sprintf("/v1/topics/T%d", i), `{"brokers":[{"name":"b","readQueues":4,"writeQueues":4}]}`, nil)
	}
	d.stop()
	db := filepath.Join(data, "allocd.db")
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(i*7 + i>>8)
	}
	refused := 0
	for off := 0; off+4096 <= len(orig); off += 4096 {
		b := slices.Clone(orig)
		copy(b[off:], junk)
		os.WriteFile(db, b, 0o600)
		code, out := serveOnce(t, data, "--listen", "256.0.0.1:0") // a start that gets past the store fails to listen
		if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Fatalf("page at %d: allocd serve panicked:\n%s", off, out)
		}
		if code != 0 && strings.Contains(out, "damaged") {
			refused++
			if !strings.Contains(out, db) || !strings.Contains(out, "backup") {
				t.Errorf("page at %d: the message does not name the file and the way out:\n%s", off, out)
			}
		}
	}
	if refused == 0 {
		t.Fatal("no damaged page was refused")
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := serveOnce(t, data)
	if code == 0 || !strings.Contains(out, "empty (0 bytes)") || !strings.Contains(out, "--create-store") || strings.Contains(out, "panic") {
		t.Fatalf("empty store file: exit %d\n%s", code, out)
	}
	d = startDaemon(t, data, wasmbuild.BuiltinPlugins(t), "--create-store")
	var topics struct{ Topics []any }
	d.must(http.StatusOK, "GET", "/v1/topics", "", &topics)
	if len(topics.Topics) != 0 {
		t.Fatalf("new store has %d topics", len(topics.Topics))
	}
}

// Heartbeats naming topics that do not exist once left a stored (group, topic) record each,
// for ever: the store, the group's status and the log grew with every made-up name.
func TestServeForgetsUndeclaredTopics(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, wasmbuild.BuiltinPlugins(t))
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely","config":{},"model":"clustering","delivery":"queue"}`, nil)
	db := filepath.Join(data, "allocd.db")
	size := func() int64 {
		fi, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for round := range 20 {
		topics := make([]string, 1024)
		for i := range topics {
			topics[i] = fmt.Sprintf("made-up-%d-%d", round, i)
		}
		body := mustJSON(map[string]any{"cid": "c1", "topics": topics})
		d.must(http.StatusOK, "POST", "/v1/groups/g/heartbeat", body, nil)
		time.Sleep(100 * time.Millisecond) // past the 50 ms debounce: the daemon gets to look at them
		d.must(http.StatusOK, "POST", "/v1/groups/g/leave", `{"cid":"c1"}`, nil)
	}
	// Past the bound (a member's own limit of 1,024 topics), a heartbeat is refused.
	many := func(prefix string) string {
		topics := make([]string, 1024)
		for i := range topics {
			topics[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return mustJSON(map[string]any{"cid": prefix, "topics": topics})
	}
	d.must(http.StatusOK, "POST", "/v1/groups/g/heartbeat", many("a"), nil)
	if code, b := d.raw("POST", "/v1/groups/g/heartbeat", many("b")); code != http.StatusConflict || !strings.Contains(string(b), "not declared") {
		t.Fatalf("heartbeat past the bound: %d %.300s", code, b)
	}
	d.must(http.StatusOK, "POST", "/v1/groups/g/leave", `{"cid":"a"}`, nil)
	time.Sleep(200 * time.Millisecond)
	code, b := d.raw("GET", "/v1/groups/g", "")
	if code != http.StatusOK || len(b) > 2048 {
		t.Fatalf("GET /v1/groups/g: %d, %d bytes: %.500s", code, len(b), b)
	}
	if after := size(); after > before {
		t.Errorf("the store grew from %d to %d bytes", before, after)
	}
	if n := strings.Count(d.stderr.String(), `"level":"info"`+`,"group":"g","topic":"made-up`); n > 0 {
		t.Errorf("%d info lines about made-up topics", n)
	}
}

const bindHash = `{"strategy":"hash","config":{},"model":"clustering","delivery":"queue"}`

// bindMine binds a group to "mine", a copy of hash that is not built into the binary: a
// built-in of the same name would serve whenever the file cannot.
const bindMine = `{"strategy":"mine","config":{},"model":"clustering","delivery":"queue"}`

// withMine adds mine.wasm (a copy of hash.wasm) to a plugin folder.
func withMine(t *testing.T, plugins string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(plugins, "hash.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(plugins, "mine.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return plugins
}

// Replacing the plugin folder (rm -rf, mkdir, cp; or mv and mkdir) stopped hot reload until a
// restart: the new folder was never watched.
func TestServeRewatchesReplacedPluginFolder(t *testing.T) {
	for _, how := range []string{"rm", "mv"} {
		t.Run(how, func(t *testing.T) {
			plugins := pluginCopy(t)
			d := startDaemon(t, t.TempDir(), plugins)
			if how == "rm" {
				os.RemoveAll(plugins)
			} else {
				os.Rename(plugins, plugins+".old")
			}
			time.Sleep(300 * time.Millisecond) // the daemon sees the folder go
			copyPlugins(t, wasmbuild.BuiltinPlugins(t), plugins)
			eventually(t, 5*time.Second, "a group bound to hash after the folder came back", func() bool {
				code := d.do("PUT", "/v1/groups/g2", bindHash, nil)
				return code == http.StatusCreated
			})
		})
	}
}

// Garbage in the compiled-code cache disabled every plugin on every restart, and /readyz said
// ready with none.
func TestServeSurvivesCorruptCompileCache(t *testing.T) {
	data, cache := t.TempDir(), t.TempDir()
	d := startDaemon(t, data, wasmbuild.BuiltinPlugins(t), "--cache-dir", cache)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", bindHash, nil)
	d.stop()
	files, _ := filepath.Glob(filepath.Join(cache, "wazero-*", "*"))
	if len(files) == 0 {
		t.Fatal("nothing was cached")
	}
	for _, f := range files {
		os.WriteFile(f, []byte(strings.Repeat("garbage ", 1000)), 0o644)
	}
	d = startDaemon(t, data, wasmbuild.BuiltinPlugins(t), "--cache-dir", cache)
	if s, _ := d.plugin("hash"); s.ActiveHash == "" {
		t.Fatalf("hash does not serve after the cache was damaged: %+v", s)
	}
	if !strings.Contains(d.stderr.String(), "cache entry unreadable") {
		t.Error("the damaged cache was not logged")
	}
}

// A group bound to a plugin that does not serve makes the daemon not ready, naming both.
func TestServeNotReadyWithoutItsPlugin(t *testing.T) {
	data, plugins := t.TempDir(), withMine(t, pluginCopy(t))
	d := startDaemon(t, data, plugins)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", bindMine, nil)
	d.stop()
	os.RemoveAll(filepath.Join(data, "plugins-good")) // no kept version to fall back on
	os.WriteFile(filepath.Join(plugins, "mine.wasm"), []byte("not a module"), 0o644)
	d = launchDaemon(t, data, plugins)
	eventually(t, time.Minute, "/readyz names the group and the plugin", func() bool {
		code, b := d.raw("GET", "/readyz", "")
		return code == http.StatusServiceUnavailable && strings.Contains(string(b), `group \"g\" is bound to plugin \"mine\"`)
	})
}

// A rejected, empty or removed file was a trap at restart: the old version served only from
// memory. The last validated version is kept in the data folder and serves, loudly.
func TestServeKeepsLastValidatedPlugin(t *testing.T) {
	data, plugins := t.TempDir(), withMine(t, pluginCopy(t))
	d := startDaemon(t, data, plugins)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"b","readQueues":8,"writeQueues":8}]}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", bindMine, nil)
	good, _ := d.plugin("mine")
	d.stop()
	for i, damage := range []struct {
		name string
		do   func(path string)
	}{
		{"rejected", func(p string) { os.WriteFile(p, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644) }},
		{"empty", func(p string) { os.WriteFile(p, nil, 0o644) }},
		{"removed", func(p string) { os.Remove(p) }},
	} {
		damage.do(filepath.Join(plugins, "mine.wasm"))
		d = startDaemon(t, data, plugins)
		s, _ := d.plugin("mine")
		if s.ActiveHash != good.ActiveHash || !s.Kept || !strings.Contains(s.Warning, "plugins-good") {
			t.Fatalf("%s: /v1/plugins/mine = %+v", damage.name, s)
		}
		var ready struct{ Warnings []string }
		d.must(http.StatusOK, "GET", "/readyz", "", &ready)
		if len(ready.Warnings) == 0 || !strings.Contains(strings.Join(ready.Warnings, " "), "last validated version") {
			t.Errorf("%s: /readyz warnings %q", damage.name, ready.Warnings)
		}
		// Rebalances work: a new member gets queues from the kept version.
		cid := fmt.Sprintf("c%d", i)
		hb := d.heartbeat("g", cid, "T")
		stopBeat := d.beat("g", cid) // through the restart grace, which holds the last member's queues
		a := d.poll("g", cid, "T", hb.Generations["T"])
		stopBeat()
		if len(a.Assignment["T"]) != 8 {
			t.Fatalf("%s: %s got %d queues: %+v", damage.name, cid, len(a.Assignment["T"]), a)
		}
		d.must(http.StatusOK, "POST", "/v1/groups/g/leave", mustJSON(map[string]string{"cid": cid}), nil)
		d.stop()
	}
}

// The first start was silent for seconds while the plugins compiled, refusing connections: now
// the daemon listens at once, says it is loading, and logs durations with their units.
func TestServeStartupProgress(t *testing.T) {
	plugins := wasmbuild.BuiltinPlugins(t)
	files, err := filepath.Glob(filepath.Join(plugins, "*.wasm"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plugins in %s: %v", plugins, err)
	}
	d := startDaemon(t, t.TempDir(), plugins)
	log := d.stderr.String()
	for _, want := range []string{`"message":"listening; loading plugins"`, `"message":"loading plugins"`, fmt.Sprintf(`"of":%d`, len(files))} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if !regexp.MustCompile(`"took":"[0-9.]+(ms|s|µs)"`).MatchString(log) {
		t.Error(`no duration with its unit ("took":"1.2s") in the log`)
	}
}

// Client ids with invalid UTF-8 became U+FFFD (two members merged into one), and a topic with
// more write queues than read queues stranded messages: both are refused with 400.
func TestServeRefusesAmbiguousInput(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", bindHash, nil)
	for _, body := range []string{"{\"cid\":\"c\xffx\"}", "{\"cid\":\"c\xfex\"}", `{"cid":"c\ud800x"}`} {
		if code, b := d.raw("POST", "/v1/groups/g/heartbeat", body); code != http.StatusBadRequest {
			t.Errorf("heartbeat %q: %d %s", body, code, b)
		}
	}
	var g struct{ Members []any }
	d.must(http.StatusOK, "GET", "/v1/groups/g", "", &g)
	if len(g.Members) != 0 {
		t.Errorf("%d members joined", len(g.Members))
	}
	if code, b := d.raw("PUT", "/v1/topics/T", `{"brokers":[{"name":"b","readQueues":1,"writeQueues":8}]}`); code != http.StatusBadRequest || !strings.Contains(string(b), "no consumer reads") {
		t.Errorf("topic with writeQueues above readQueues: %d %s", code, b)
	}
}
