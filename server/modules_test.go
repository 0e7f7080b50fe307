package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/server"
)

// modules is an in-memory server.Modules: the registry's contract, for the handler alone.
type modules struct {
	mu sync.Mutex
	m  map[string][]byte
	ch chan struct{}
}

func newModules() *modules { return &modules{m: map[string][]byte{}, ch: make(chan struct{})} }

func (m *modules) Module(name string) ([]byte, string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.m[name]
	return b, hashOf(b), ok
}

func (m *modules) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ch
}

func (m *modules) set(name string, b []byte) {
	m.mu.Lock()
	m.m[name] = b
	close(m.ch)
	m.ch = make(chan struct{})
	m.mu.Unlock()
}

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newModuleServer(t *testing.T, mods *modules) (*server.Server, string) {
	t.Helper()
	e := newEnv(t, nil)
	s, err := server.New(server.Options{Coordinator: e.c, Modules: mods, MaxWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func getModule(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestModuleServesTheVersionInForce(t *testing.T) {
	mods := newModules()
	v1 := []byte("\x00asm version one")
	mods.set("s", v1)
	_, url := newModuleServer(t, mods)

	resp, body := getModule(t, url+"/v1/plugins/s/module")
	if resp.StatusCode != 200 || string(body) != string(v1) {
		t.Fatalf("GET: %d %q, want 200 with the module", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/wasm" {
		t.Errorf("Content-Type %q, want application/wasm", ct)
	}
	etag := resp.Header.Get("ETag")
	if etag != `"`+hashOf(v1)+`"` {
		t.Fatalf("ETag %s, want the content hash %s", etag, hashOf(v1))
	}
	if resp, _ := getModule(t, url+"/v1/plugins/s/module", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the current ETag: %d, want 304", resp.StatusCode)
	}
	// after= another hash answers at once with the version in force.
	if resp, body := getModule(t, url+"/v1/plugins/s/module?after="+hashOf([]byte("old"))+"&wait=5s"); resp.StatusCode != 200 || string(body) != string(v1) {
		t.Errorf("after=an older hash: %d %q, want 200 with the module at once", resp.StatusCode, body)
	}
	// after= the current hash with a short wait: 304 once the wait ends.
	resp, body = getModule(t, url+"/v1/plugins/s/module?after="+hashOf(v1)+"&wait=10ms")
	if resp.StatusCode != http.StatusNotModified || len(body) != 0 || resp.Header.Get("ETag") != etag {
		t.Errorf("after=current, wait over: %d, ETag %s, %d bytes; want 304, the same ETag, no body", resp.StatusCode, resp.Header.Get("ETag"), len(body))
	}
}

func TestModuleLongPollWakesOnANewVersion(t *testing.T) {
	mods := newModules()
	v1, v2 := []byte("\x00asm one"), []byte("\x00asm two")
	mods.set("s", v1)
	s, url := newModuleServer(t, mods)
	got := make(chan []byte, 1)
	go func() {
		resp, err := http.Get(url + "/v1/plugins/s/module?after=" + hashOf(v1) + "&wait=5s")
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- b
	}()
	for s.Waiting() == 0 { // the poll is parked on the current version
		time.Sleep(time.Millisecond)
	}
	mods.set("other", []byte("x")) // another plugin's change wakes it, but it keeps waiting
	mods.set("s", v2)
	select {
	case b := <-got:
		if string(b) != string(v2) {
			t.Fatalf("long-poll answered %q, want the new version", b)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("long-poll did not answer the new version")
	}
}

func TestModuleErrors(t *testing.T) {
	mods := newModules()
	mods.set("s", []byte("\x00asm"))
	_, url := newModuleServer(t, mods)
	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{"/v1/plugins/nope/module", 404, `nope\" not found`},
		{"/v1/plugins/s/module?after=not-hex", 400, "not a content hash"},
		{"/v1/plugins/s/module?wait=1s", 400, "needs after"},
		{"/v1/plugins/s/module?after=ab&wait=soon", 400, "not a duration"},
		{"/v1/plugins/s/module?after=ab&x=1", 400, `unknown query parameter \"x\"`},
		{"/v1/plugins/s/module?after=" + strings.Repeat("a", 200), 400, "not a content hash"},
	} {
		resp, body := getModule(t, url+c.path)
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.msg) {
			t.Errorf("GET %s: %d %s, want %d with %q", c.path, resp.StatusCode, body, c.code, c.msg)
		}
	}
	req, _ := http.NewRequest("POST", url+"/v1/plugins/s/module", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 405 {
		t.Errorf("POST: %v %v, want 405", r, err)
	}
}
