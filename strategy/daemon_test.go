package strategy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/daemontest"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/strategy"
)

// A strategy from the daemon follows the daemon's reloads, keeps serving while the daemon is
// down, and starts from its cached module when the daemon is still down.
func TestDaemonSourceFollowsTheDaemon(t *testing.T) {
	plugins := t.TempDir()
	install(t, filepath.Join(plugins, "s.wasm"), plugin(t, "averagely"))
	d := daemontest.Start(t, plugins, cacheDir)
	url, kill := d.URL, d.Kill
	modules := t.TempDir()
	cfg := strategy.Config{Daemon: url, Name: "s", CacheDir: modules, PollWait: 5 * time.Second, RetryInterval: 50 * time.Millisecond}
	s, ev := open(t, withCompileCache(cfg))
	g := group(10, 4)
	if a, err := s.Assign(context.Background(), g); err != nil || !equal(a.Owned, native(averagely.Allocate, 10, 4)) {
		t.Fatalf("from the daemon: %v %v, want averagely's answer", a, err)
	}

	install(t, filepath.Join(plugins, "s.wasm"), plugin(t, "circle"))
	ev.wait(t, registry.Reloaded)
	a, err := s.Assign(context.Background(), g)
	if err != nil || !equal(a.Owned, native(circle.Allocate, 10, 4)) || a.Version.Hash != host.Hash(plugin(t, "circle")) {
		t.Fatalf("after the daemon's reload: %v %v, want circle's answer", a, err)
	}

	kill()
	if a, err := s.Assign(context.Background(), g); err != nil || !equal(a.Owned, native(circle.Allocate, 10, 4)) {
		t.Fatalf("with the daemon down: %v %v, want the last good module's answer", a, err)
	}
	s.Close()

	// A restart without the daemon starts from the cached module.
	s2, _ := open(t, withCompileCache(cfg))
	if v := s2.Version(); v.Hash != host.Hash(plugin(t, "circle")) {
		t.Fatalf("restarted without the daemon: serving %s, want the cached circle", v.Hash)
	}
	if a, err := s2.Assign(context.Background(), g); err != nil || !equal(a.Owned, native(circle.Allocate, 10, 4)) {
		t.Fatalf("restarted without the daemon: %v %v", a, err)
	}

	// Without a cache there is nothing to serve, and the error says so.
	cfg.CacheDir = t.TempDir()
	if s3, err := strategy.Open(context.Background(), cfg); err == nil {
		s3.Close()
		t.Fatal("opened with neither a daemon nor a cached module")
	} else if !strings.Contains(err.Error(), "no module cached") {
		t.Fatalf("error %q, want it to say no module is cached", err)
	}
}

// withCompileCache keeps the daemon source's module cache where cfg says, and compiled code in
// the tests' shared folder.
func withCompileCache(cfg strategy.Config) strategy.Config {
	cfg.Host.CacheDir = filepath.Join(cacheDir, "wazero")
	return cfg
}

// badDaemon serves /v1/plugins/s/module from bytes the test sets, with the long-poll's rules,
// and lets the test damage the ETag: a daemon (or a proxy) that answers what no real allocd
// would.
type badDaemon struct {
	mu      sync.Mutex
	wasm    []byte
	etag    string
	changed chan struct{}
}

func (d *badDaemon) set(wasm []byte, etag string) {
	d.mu.Lock()
	d.wasm, d.etag = wasm, etag
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *badDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/plugins/s/module" {
		http.NotFound(w, r)
		return
	}
	for {
		d.mu.Lock()
		wasm, etag, changed := d.wasm, d.etag, d.changed
		d.mu.Unlock()
		after := r.URL.Query().Get("after")
		if after == "" || after != etag {
			w.Header().Set("ETag", `"`+etag+`"`)
			w.Write(wasm)
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
			w.Header().Set("ETag", `"`+etag+`"`)
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// The client judges every module itself: a module that fails its checks, or whose bytes do not
// match their hash, never serves and never replaces the cached one.
func TestDaemonSourceRejectsBadModules(t *testing.T) {
	good := plugin(t, "averagely")
	d := &badDaemon{changed: make(chan struct{})}
	d.set(good, host.Hash(good))
	ts := httptest.NewServer(d)
	t.Cleanup(ts.Close)
	modules := t.TempDir()
	s, ev := open(t, withCompileCache(strategy.Config{Daemon: ts.URL, Name: "s", CacheDir: modules, RetryInterval: 20 * time.Millisecond}))
	g := group(10, 4)

	garbage := []byte("\x00asm\x01\x00\x00\x00 not really")
	d.set(garbage, host.Hash(garbage))
	if e := ev.wait(t, registry.Failed); e.Hash != host.Hash(garbage) || e.Err == "" {
		t.Fatalf("rejection %+v, want the garbage's hash and a reason", e)
	}
	trap := wasmbuild.Bytes(t, "host/testdata/plugins/trap") // compiles, fails the self-test
	d.set(trap, host.Hash(trap))
	if e := ev.wait(t, registry.Failed); !strings.Contains(e.Err, "self-test") {
		t.Fatalf("rejection %+v, want the self-test named", e)
	}
	d.set(plugin(t, "circle"), host.Hash(good)) // bytes that do not match their ETag
	if a, err := s.Assign(context.Background(), g); err != nil || !equal(a.Owned, native(averagely.Allocate, 10, 4)) {
		t.Fatalf("after bad modules: %v %v, want the good one's answer", a, err)
	}
	matches, _ := filepath.Glob(filepath.Join(modules, "modules", "*", "s.wasm"))
	if len(matches) != 1 {
		t.Fatalf("cached modules %v, want one", matches)
	}
	if b, _ := os.ReadFile(matches[0]); host.Hash(b) != host.Hash(good) {
		t.Fatal("the cached module is not the last good one")
	}
	if v := s.Version(); v.Hash != host.Hash(good) {
		t.Fatalf("serving %s, want the good module", v.Hash)
	}
}
