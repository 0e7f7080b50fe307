package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
