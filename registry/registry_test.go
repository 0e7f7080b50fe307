package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// Every test of the process shares one runtime and one compilation cache folder: compiling a Go
// guest under the race detector takes seconds, so each module is compiled once.
var (
	cacheDir string
	rtOnce   sync.Once
	sharedRT *host.Runtime
	rtErr    error
)

func TestMain(m *testing.M) {
	cacheDir, _ = os.MkdirTemp("", "allocd-registry-cache-")
	code := m.Run()
	if sharedRT != nil {
		sharedRT.Close(context.Background())
	}
	os.RemoveAll(cacheDir)
	wasmbuild.Cleanup()
	os.Exit(code)
}

func testRuntime(tb testing.TB) *host.Runtime {
	tb.Helper()
	rtOnce.Do(func() {
		// A generous call deadline: the race detector and a busy machine slow instances down,
		// and deadlines are not what these tests are about.
		sharedRT, rtErr = host.NewRuntime(context.Background(), host.Config{CacheDir: cacheDir, Timeout: 30 * time.Second})
	})
	if rtErr != nil {
		tb.Fatal(rtErr)
	}
	return sharedRT
}

const (
	pkgFirst    = "host/testdata/plugins/first"
	pkgPlain    = "host/testdata/plugins/plainpdk"
	pkgWrongABI = "host/testdata/plugins/wrongabi"
)

// waitFor bounds every wait: a first compile under the race detector on a busy 2-core machine
// takes a while.
const waitFor = 3 * time.Minute

// withSection returns wasm with a custom section appended that holds n: the same code under a
// new content hash.
func withSection(wasm []byte, n int) []byte {
	const name = "allocd-test"
	payload := binary.AppendUvarint(nil, uint64(len(name)))
	payload = append(payload, name...)
	payload = binary.AppendUvarint(payload, uint64(n))
	out := append(slices.Clip(wasm), 0)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

type check struct{ name, outcome string }

// fixture is a running registry with its event stream and the outcome of every check.
type fixture struct {
	t      *testing.T
	dir    string
	r      *Registry
	events <-chan Event

	mu     sync.Mutex
	checks []check
	signal chan struct{}
	cursor int
	// stop ends Run and waits for it (the registry is closed then); later calls do nothing.
	stop func()
}

func start(t *testing.T, dir string, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: dir, signal: make(chan struct{}, 1)}
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	opts.checked = func(name, outcome string) {
		f.mu.Lock()
		f.checks = append(f.checks, check{name, outcome})
		f.mu.Unlock()
		select {
		case f.signal <- struct{}{}:
		default:
		}
	}
	r, err := New(testRuntime(t), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	events, unsubscribe := r.Subscribe()
	f.events = events
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			unsubscribe()
		})
	}
	t.Cleanup(f.stop)
	return f
}

// event waits for the next event that matches, skipping (and logging) others.
func (f *fixture) event(match func(Event) bool) Event {
	f.t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case e, ok := <-f.events:
			if !ok {
				f.t.Fatal("event stream closed")
			}
			if match(e) {
				return e
			}
			f.t.Logf("skipped event %+v", e)
		case <-timeout:
			f.t.Fatalf("no matching event within %v", waitFor)
		}
	}
}

func (f *fixture) eventFor(name string, kind EventKind, hash string) Event {
	f.t.Helper()
	return f.event(func(e Event) bool { return e.Name == name && e.Kind == kind && (hash == "" || e.Hash == hash) })
}

// noEvent fails if an event is already waiting.
func (f *fixture) noEvent() {
	f.t.Helper()
	select {
	case e := <-f.events:
		f.t.Fatalf("unexpected event %+v", e)
	default:
	}
}

// check waits for the next check of name with the outcome, skipping earlier ones.
func (f *fixture) check(name, outcome string) {
	f.t.Helper()
	timeout := time.After(waitFor)
	for {
		f.mu.Lock()
		for f.cursor < len(f.checks) {
			c := f.checks[f.cursor]
			f.cursor++
			if c.name == name && c.outcome == outcome {
				f.mu.Unlock()
				return
			}
		}
		f.mu.Unlock()
		select {
		case <-f.signal:
		case <-timeout:
			f.t.Fatalf("no %s check of %q within %v", outcome, name, waitFor)
		}
	}
}

func (f *fixture) checkedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, c := range f.checks {
		if !slices.Contains(names, c.name) {
			names = append(names, c.name)
		}
	}
	return names
}

func (f *fixture) path(name string) string { return filepath.Join(f.dir, name+".wasm") }

func (f *fixture) status(name string) Status {
	f.t.Helper()
	s, ok := f.r.StatusOf(name)
	if !ok {
		f.t.Fatalf("no status for %q", name)
	}
	return s
}

func request() *abi.Request {
	return &abi.Request{Group: "g", Queues: []abi.Queue{
		{Topic: "T", BrokerName: "b0", QueueID: 0}, {Topic: "T", BrokerName: "b0", QueueID: 1},
		{Topic: "T", BrokerName: "b1", QueueID: 0}, {Topic: "T", BrokerName: "b1", QueueID: 1},
	}, Consumers: []string{"c1", "c0"}}
}

// served calls plugin name once and returns the hash of the version that answered.
func (f *fixture) served(name string) string {
	f.t.Helper()
	_, v, err := f.r.Allocate(context.Background(), name, request())
	if err != nil {
		f.t.Fatalf("Allocate(%q): %v", name, err)
	}
	return v.Hash
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyOver writes the way cp does over an existing file: truncate, then write in chunks.
func copyOver(t testing.TB, path string, data []byte) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += 128 << 10 {
		if _, err := fh.Write(data[off:min(off+128<<10, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

// renameInto writes a hidden temp file beside path and renames it over path.
func renameInto(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// callers call plugin name from n goroutines until stopped, recording the versions that
// answered and every failure.
type callers struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	calls    atomic.Int64
	mu       sync.Mutex
	failures []error
	hashes   map[string]int64
}

func startCallers(r *Registry, name string, n int) *callers {
	c := &callers{stop: make(chan struct{}), hashes: map[string]int64{}}
	for range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			seen := map[string]int64{}
			defer func() {
				c.mu.Lock()
				for h, k := range seen {
					c.hashes[h] += k
				}
				c.mu.Unlock()
			}()
			for {
				select {
				case <-c.stop:
					return
				default:
				}
				_, v, err := r.Allocate(context.Background(), name, request())
				c.calls.Add(1)
				if err != nil {
					c.mu.Lock()
					c.failures = append(c.failures, err)
					c.mu.Unlock()
					continue
				}
				seen[v.Hash]++
			}
		}()
	}
	return c
}

// end stops the callers and fails the test on any failed call or any version outside allowed
// (when given).
func (c *callers) end(t testing.TB, allowed ...string) map[string]int64 {
	t.Helper()
	close(c.stop)
	c.wg.Wait()
	if len(c.failures) > 0 {
		t.Errorf("%d of %d calls failed; first: %v", len(c.failures), c.calls.Load(), c.failures[0])
	}
	for h, n := range c.hashes {
		if len(allowed) > 0 && !slices.Contains(allowed, h) {
			t.Errorf("%d calls served by unexpected version %s", n, short(h))
		}
	}
	t.Logf("%d calls, by version: %v", c.calls.Load(), c.hashes)
	return c.hashes
}

func TestInitialLoadAndStatus(t *testing.T) {
	dir := t.TempDir()
	first := wasmbuild.Bytes(t, pkgFirst)
	garbage := []byte("\x00asm\x01\x00\x00\x00 this is not a module")
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	writeFile(t, filepath.Join(dir, "bad.wasm"), garbage)
	for _, ignored := range []string{".a.wasm.tmp", "a.wasm~", ".#a", "notes.txt", ".hidden.wasm"} {
		writeFile(t, filepath.Join(dir, ignored), garbage)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := start(t, dir, Options{Clock: fixedClock{at}})

	st := f.r.Status()
	if len(st) != 2 || st[0].Name != "a" || st[1].Name != "bad" {
		t.Fatalf("Status = %+v, want a and bad", st)
	}
	a := st[0]
	if a.ActiveHash != host.Hash(first) || a.Version != "1.0.0" || a.Info.Name != "first" || !a.LoadedAt.Equal(at) ||
		a.LastError != "" || a.File != filepath.Join(f.r.Dir(), "a.wasm") || a.FileGone || a.Reloads != 0 {
		t.Errorf("status of a = %+v", a)
	}
	bad := st[1]
	if bad.ActiveHash != "" || bad.LastAttemptHash != host.Hash(garbage) || bad.Failures != 1 ||
		!strings.Contains(bad.LastError, "malformed module") || !bad.LastAttempt.Equal(at) {
		t.Errorf("status of bad = %+v", bad)
	}

	resp, v, err := f.r.Allocate(context.Background(), "a", request())
	if err != nil {
		t.Fatal(err)
	}
	if v != (Version{Hash: host.Hash(first), Version: "1.0.0"}) || len(resp.Results) != 2 {
		t.Errorf("Allocate = %+v, %+v", resp, v)
	}
	if s := f.status("a"); s.Stats.Calls < 2 { // the self-test and this call
		t.Errorf("stats = %+v", s.Stats)
	}
	own, ov, err := f.r.AllocateOwners(context.Background(), "a", request())
	if err != nil {
		t.Fatal(err)
	}
	if ov != v || (own.Owners == nil) == (len(own.Results) == 0) {
		t.Errorf("AllocateOwners = %+v, %+v; want the version of Allocate and owners or lists", own, ov)
	}
	for _, name := range []string{"bad", "nope"} {
		_, _, err := f.r.Allocate(context.Background(), name, request())
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Allocate(%q) = %v, want ErrNotFound", name, err)
		}
		if _, _, err := f.r.AllocateOwners(context.Background(), name, request()); !errors.Is(err, ErrNotFound) {
			t.Errorf("AllocateOwners(%q) = %v, want ErrNotFound", name, err)
		}
	}
	if _, _, err := f.r.Acquire("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Acquire(nope) = %v", err)
	}
}

func TestNewChangedAndSameBytes(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	f := start(t, dir, Options{})

	writeFile(t, f.path("a"), first)
	e := f.eventFor("a", Loaded, host.Hash(first))
	if e.Version != "1.0.0" {
		t.Errorf("event = %+v", e)
	}
	if got := f.served("a"); got != host.Hash(first) {
		t.Fatalf("served by %s", short(got))
	}

	writeFile(t, f.path("a"), plain)
	f.eventFor("a", Reloaded, host.Hash(plain))
	if got := f.served("a"); got != host.Hash(plain) {
		t.Fatalf("served by %s after reload", short(got))
	}

	// The same bytes again: no reload.
	writeFile(t, f.path("a"), plain)
	f.check("a", outUnchanged)
	f.noEvent()
	if s := f.status("a"); s.Reloads != 1 || s.ActiveHash != host.Hash(plain) {
		t.Errorf("status = %+v", s)
	}
}

func TestPartialWriteInPlace(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	c := startCallers(f.r, "a", 2)

	// An editor (or a slow copy) has written half the file and paused.
	half := plain[:len(plain)/2]
	writeFile(t, f.path("a"), half)
	f.eventFor("a", Failed, host.Hash(half))
	if s := f.status("a"); s.ActiveHash != host.Hash(first) || s.LastError == "" || s.LastAttemptHash != host.Hash(half) {
		t.Errorf("after the half write: %+v", s)
	}
	if got := f.served("a"); got != host.Hash(first) {
		t.Fatalf("served by %s after the half write", short(got))
	}

	// The rest arrives.
	fh, err := os.OpenFile(f.path("a"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(plain[len(plain)/2:]); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	f.eventFor("a", Reloaded, host.Hash(plain))
	if s := f.status("a"); s.LastError != "" || s.Failures != 1 {
		t.Errorf("after the whole write: %+v", s)
	}
	c.end(t, host.Hash(first), host.Hash(plain))
}

// TestSlowCopyNotRejected pauses a copy halfway, as a copy over a slow link does: the half file
// fails to load, but the file changed too recently for that to count, and the copy completes
// before the file has been quiet for Debounce. No failure is recorded.
func TestSlowCopyNotRejected(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{Debounce: 5 * time.Second})
	c := startCallers(f.r, "a", 2)
	fh, err := os.OpenFile(f.path("a"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(plain[:len(plain)/2]); err != nil {
		t.Fatal(err)
	}
	f.check("a", outPending) // read, failed to load, not believed yet
	if _, err := fh.Write(plain[len(plain)/2:]); err != nil {
		t.Fatal(err)
	}
	f.eventFor("a", Reloaded, host.Hash(plain))
	c.end(t, host.Hash(first), host.Hash(plain))
	if s := f.status("a"); s.Failures != 0 || s.LastError != "" || s.ActiveHash != host.Hash(plain) {
		t.Errorf("status = %+v", s)
	}
}

func TestCopyOver(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	c := startCallers(f.r, "a", 2)
	copyOver(t, f.path("a"), plain)
	f.eventFor("a", Reloaded, host.Hash(plain))
	c.end(t, host.Hash(first), host.Hash(plain))
	if got := f.served("a"); got != host.Hash(plain) {
		t.Fatalf("served by %s", short(got))
	}
}

func TestTempThenRename(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})

	// Temp and backup files of editors and deploy tools are not plugins.
	for _, name := range []string{".a.wasm.tmp", "a.wasm~", ".#a", "a.wasm.swp", ".a.wasm"} {
		writeFile(t, filepath.Join(dir, name), plain)
	}
	renameInto(t, f.path("a"), plain)
	f.eventFor("a", Reloaded, host.Hash(plain))
	if got := f.served("a"); got != host.Hash(plain) {
		t.Fatalf("served by %s", short(got))
	}
	if names := f.checkedNames(); !slices.Equal(names, []string{"a"}) {
		t.Errorf("checked %q, want only a", names)
	}
	if st := f.r.Status(); len(st) != 1 {
		t.Errorf("Status = %+v", st)
	}
}

// TestConfigMapSwap lays the folder out as the kubelet does for a ConfigMap volume, then
// updates it the kubelet's way: a new timestamped folder, a new ..data symlink renamed over the
// old one, the old folder removed. No event names a.wasm itself.
func TestConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	v1 := "..2026_01_02_03_04_05.000000001"
	if err := os.Mkdir(filepath.Join(dir, v1), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, v1, "a.wasm"), first)
	mustSymlink(t, v1, filepath.Join(dir, "..data"))
	mustSymlink(t, filepath.Join("..data", "a.wasm"), filepath.Join(dir, "a.wasm"))

	f := start(t, dir, Options{})
	if s := f.status("a"); s.ActiveHash != host.Hash(first) {
		t.Fatalf("status = %+v", s)
	}
	c := startCallers(f.r, "a", 2)

	v2 := "..2026_01_02_03_05_00.000000002"
	if err := os.Mkdir(filepath.Join(dir, v2), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, v2, "a.wasm"), plain)
	writeFile(t, filepath.Join(dir, v2, "b.wasm"), first)
	mustSymlink(t, v2, filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join("..data", "b.wasm"), filepath.Join(dir, "b.wasm")) // a new key
	if err := os.RemoveAll(filepath.Join(dir, v1)); err != nil {
		t.Fatal(err)
	}

	// a reloads and b loads, in either order.
	want := map[string]Event{"a": {Kind: Reloaded, Hash: host.Hash(plain)}, "b": {Kind: Loaded, Hash: host.Hash(first)}}
	for len(want) > 0 {
		e := f.event(func(e Event) bool { w, ok := want[e.Name]; return ok && e.Kind == w.Kind && e.Hash == w.Hash })
		delete(want, e.Name)
	}
	c.end(t, host.Hash(first), host.Hash(plain))
	if got := f.served("b"); got != host.Hash(first) {
		t.Fatalf("b served by %s", short(got))
	}
	for _, s := range f.r.Status() {
		if strings.HasPrefix(s.Name, ".") {
			t.Errorf("status lists %q", s.Name)
		}
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestBurstOfWrites(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	c := startCallers(f.r, "a", 2)
	for i := range 50 {
		data := first
		if i%2 == 1 {
			data = plain // the last write, i = 49
		}
		writeFile(t, f.path("a"), data)
	}
	f.eventFor("a", Reloaded, host.Hash(plain))
	c.end(t, host.Hash(first), host.Hash(plain))
	s := f.status("a")
	t.Logf("50 writes: %d reloads, %d rejected reads of half-written files", s.Reloads, s.Failures)
	if s.Reloads > 5 {
		t.Errorf("50 writes in a burst caused %d reloads", s.Reloads)
	}
	if s.ActiveHash != host.Hash(plain) || f.served("a") != host.Hash(plain) {
		t.Errorf("final content not served: %+v", s)
	}
}

func TestRemove(t *testing.T) {
	first := wasmbuild.Bytes(t, pkgFirst)

	t.Run("unused", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.wasm"), first)
		f := start(t, dir, Options{})
		os.Remove(f.path("a"))
		f.eventFor("a", Removed, host.Hash(first))
		if _, _, err := f.r.Allocate(context.Background(), "a", request()); !errors.Is(err, ErrNotFound) {
			t.Errorf("Allocate after removal = %v", err)
		}
		if _, ok := f.r.StatusOf("a"); ok {
			t.Error("status still lists a")
		}
	})

	t.Run("Use", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.wasm"), first)
		f := start(t, dir, Options{})
		release := f.r.Use("a")
		os.Remove(f.path("a"))
		f.eventFor("a", Gone, host.Hash(first))
		if got := f.served("a"); got != host.Hash(first) {
			t.Fatalf("served by %s", short(got))
		}
		if s := f.status("a"); !s.FileGone || s.ActiveHash != host.Hash(first) {
			t.Errorf("status = %+v", s)
		}
		release()
		release() // harmless
		f.eventFor("a", Removed, host.Hash(first))
		if _, _, err := f.r.Allocate(context.Background(), "a", request()); !errors.Is(err, ErrNotFound) {
			t.Errorf("Allocate after the last release = %v", err)
		}
	})

	t.Run("InUse", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.wasm"), first)
		var used atomic.Bool
		used.Store(true)
		f := start(t, dir, Options{InUse: func(name string) bool { return name == "a" && used.Load() }})
		os.Remove(f.path("a"))
		f.eventFor("a", Gone, host.Hash(first))
		if s := f.status("a"); !s.FileGone || f.served("a") != host.Hash(first) {
			t.Errorf("status = %+v", s)
		}
		// The file comes back with the same bytes: nothing to reload, and it is no longer gone.
		writeFile(t, f.path("a"), first)
		f.check("a", outUnchanged)
		if s := f.status("a"); s.FileGone {
			t.Errorf("status after the file came back = %+v", s)
		}
		// Removed again, and no longer used: Rescan unloads it.
		os.Remove(f.path("a"))
		f.eventFor("a", Gone, host.Hash(first))
		used.Store(false)
		f.r.Rescan()
		f.eventFor("a", Removed, host.Hash(first))
	})
}

type metricsRecorder struct {
	mu  sync.Mutex
	obs []string
}

func (m *metricsRecorder) ObserveReload(plugin, result string, d time.Duration) {
	m.mu.Lock()
	m.obs = append(m.obs, plugin+"/"+result)
	m.mu.Unlock()
}

func TestBadVersionKeepsServing(t *testing.T) {
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	cases := []struct {
		name   string
		data   []byte
		reason string
	}{
		{"garbage", []byte("this is not wasm at all, just text"), "not a WebAssembly module"},
		{"truncated", first[:len(first)-1000], "runs past the end of the module"},
		{"wrongabi", wasmbuild.Bytes(t, pkgWrongABI), "ABI 2.0"},
		{"validate", plain, "validate: rejected by the test's hook"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "a.wasm"), first)
			m := &metricsRecorder{}
			f := start(t, dir, Options{Metrics: m, Validate: func(ctx context.Context, p *host.Plugin) error {
				if p.Hash() == host.Hash(plain) {
					return errors.New("rejected by the test's hook")
				}
				return nil
			}})
			c := startCallers(f.r, "a", 2)
			writeFile(t, f.path("a"), tc.data)
			e := f.eventFor("a", Failed, host.Hash(tc.data))
			if !strings.Contains(e.Err, tc.reason) {
				t.Errorf("event error %q lacks %q", e.Err, tc.reason)
			}
			s := f.status("a")
			if s.ActiveHash != host.Hash(first) || s.LastAttemptHash != host.Hash(tc.data) ||
				!strings.Contains(s.LastError, tc.reason) || s.Failures != 1 || s.Reloads != 0 {
				t.Errorf("status = %+v", s)
			}
			// The same bad bytes again are not tried again.
			writeFile(t, f.path("a"), tc.data)
			f.check("a", outSkipped)
			c.end(t, host.Hash(first))
			if s := f.status("a"); s.Failures != 1 {
				t.Errorf("failures = %d after the same bytes again", s.Failures)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if !slices.Equal(m.obs, []string{"a/ok", "a/failed"}) {
				t.Errorf("metrics saw %q", m.obs)
			}
		})
	}
}

// TestValidateBeforeSwap checks that the hook sees the new version while the old one still
// serves, and that it may call the new version.
func TestValidateBeforeSwap(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	var r atomic.Pointer[Registry]
	hookErr := make(chan error, 4)
	f := start(t, dir, Options{Validate: func(ctx context.Context, p *host.Plugin) error {
		reg := r.Load()
		if reg == nil {
			hookErr <- nil // the initial load, inside New
			return nil
		}
		if _, v, err := reg.Allocate(ctx, "a", request()); err != nil || v.Hash != host.Hash(first) {
			hookErr <- fmt.Errorf("during validation, Allocate = %v, %v; want the old version", v, err)
			return nil
		}
		if _, err := p.Allocate(ctx, request()); err != nil {
			hookErr <- err
			return nil
		}
		hookErr <- nil
		return nil
	}})
	r.Store(f.r)
	writeFile(t, f.path("a"), plain)
	f.eventFor("a", Reloaded, host.Hash(plain))
	for range 2 {
		if err := <-hookErr; err != nil {
			t.Error(err)
		}
	}
}

func TestAcquirePinsVersion(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	p, release, err := f.r.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.path("a"), plain)
	f.eventFor("a", Reloaded, host.Hash(plain))
	if got := f.served("a"); got != host.Hash(plain) {
		t.Fatalf("registry serves %s", short(got))
	}
	if p.Hash() != host.Hash(first) {
		t.Fatalf("pinned plugin is %s", short(p.Hash()))
	}
	if _, err := p.Allocate(context.Background(), request()); err != nil {
		t.Fatalf("pinned old version: %v", err)
	}
	release()
	release()
	// The old version closes once released; Close (in the cleanup) waits for that too.
	deadline := time.Now().Add(waitFor)
	for {
		_, err := p.Allocate(context.Background(), request())
		if host.IsKind(err, host.KindClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old version still open after release: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling the close, not waiting out a timer
	}
}

// TestReloadUnderLoad swaps versions several times, by every kind of write, while four
// goroutines call continuously: not one call may fail.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	f := start(t, dir, Options{})
	c := startCallers(f.r, "a", 4)
	writes := []func(testing.TB, string, []byte){renameInto, copyOver, writeFile}
	const swaps = 6
	for i := range swaps {
		data := plain
		if i%2 == 1 {
			data = first
		}
		before := c.calls.Load()
		writes[i%len(writes)](t, f.path("a"), data)
		f.eventFor("a", Reloaded, host.Hash(data))
		t.Logf("swap %d: %d calls meanwhile", i+1, c.calls.Load()-before)
	}
	hashes := c.end(t, host.Hash(first), host.Hash(plain))
	if hashes[host.Hash(first)] == 0 || hashes[host.Hash(plain)] == 0 {
		t.Errorf("calls by version: %v", hashes)
	}
	if s := f.status("a"); s.Reloads != swaps || s.Failures != 0 {
		t.Errorf("status = %+v", s)
	}
}

func TestCloseAndSubscribe(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.wasm"), wasmbuild.Bytes(t, pkgFirst))
	r, err := New(testRuntime(t), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	events, unsubscribe := r.Subscribe()
	_, unsubscribe2 := r.Subscribe()
	unsubscribe2()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-events; ok {
		t.Error("event stream still open after Close")
	}
	unsubscribe()
	if _, _, err := r.Allocate(context.Background(), "a", request()); !errors.Is(err, ErrClosed) {
		t.Errorf("Allocate after Close = %v", err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v", err)
	}
	if _, err := New(testRuntime(t), filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("New on a missing folder succeeded")
	}
}

// timers records the retries a registry schedules, for the test to fire: no test waits for a
// real timer.
type timers chan timer

type timer struct {
	d time.Duration
	f func()
}

func (ts timers) after(d time.Duration, f func()) { ts <- timer{d, f} }

// next waits for the next retry scheduled and checks its delay.
func (ts timers) next(t *testing.T, want time.Duration) timer {
	t.Helper()
	select {
	case tm := <-ts:
		if tm.d != want {
			t.Fatalf("retry scheduled in %v, want %v", tm.d, want)
		}
		return tm
	case <-time.After(waitFor):
		t.Fatalf("no retry scheduled within %v", waitFor)
	}
	return timer{}
}

func (ts timers) none(t *testing.T) {
	t.Helper()
	select {
	case tm := <-ts:
		t.Fatalf("a retry was scheduled in %v", tm.d)
	default:
	}
}

// TestDeadlineRefusalIsTriedAgain: a version refused because a deadline passed (a loaded machine
// makes a good version's _initialize or validation run out of time) is tried again, after
// RetryAfter and then twice as long each time, Retries times; a version refused for any other
// reason is not, and a retry due for a version since replaced does not try it.
func TestDeadlineRefusalIsTriedAgain(t *testing.T) {
	first, plain := wasmbuild.Bytes(t, pkgFirst), wasmbuild.Bytes(t, pkgPlain)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	slow, bad := withSection(plain, 1), withSection(plain, 2)
	var mu sync.Mutex
	tries := map[string]int{}
	failFor := map[string]int{host.Hash(plain): 2, host.Hash(slow): 1 << 30} // deadline refusals before it passes
	validate := func(ctx context.Context, p *host.Plugin) error {
		mu.Lock()
		defer mu.Unlock()
		tries[p.Hash()]++
		if p.Hash() == host.Hash(bad) {
			return errors.New("a bug of the version's own")
		}
		if tries[p.Hash()] <= failFor[p.Hash()] {
			return fmt.Errorf("the test's slow machine: %w", context.DeadlineExceeded)
		}
		return nil
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.wasm"), first)
	ts := make(timers, 8)
	f := start(t, dir, Options{Validate: validate, Clock: fixedClock{at}, RetryAfter: 2 * time.Second, Retries: 3, after: ts.after})

	// Refused twice for a deadline, then served.
	writeFile(t, f.path("a"), plain)
	f.eventFor("a", Failed, host.Hash(plain))
	tm := ts.next(t, 2*time.Second)
	s := f.status("a")
	if s.ActiveHash != host.Hash(first) || !s.RetryAt.Equal(at.Add(2*time.Second)) || !strings.Contains(s.Warning, "it is tried again at 2026-12-03T12:00:02Z") {
		t.Fatalf("status after the first refusal = %+v", s)
	}
	tm.f()
	f.eventFor("a", Failed, host.Hash(plain))
	ts.next(t, 4*time.Second).f()
	f.eventFor("a", Reloaded, host.Hash(plain))
	if s := f.status("a"); s.ActiveHash != host.Hash(plain) || !s.RetryAt.IsZero() || s.Warning != "" || s.Failures != 2 {
		t.Fatalf("status once served = %+v", s)
	}
	ts.none(t)

	// Refused for a deadline every time: tried again Retries times, then left rejected.
	writeFile(t, f.path("a"), slow)
	f.eventFor("a", Failed, host.Hash(slow))
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		ts.next(t, d).f()
		f.eventFor("a", Failed, host.Hash(slow))
	}
	f.check("a", outFailed)
	ts.none(t)
	if s := f.status("a"); s.ActiveHash != host.Hash(plain) || !s.RetryAt.IsZero() || strings.Contains(s.Warning, "tried again") || s.Failures != 6 {
		t.Fatalf("status after the last retry = %+v", s)
	}
	mu.Lock()
	if n := tries[host.Hash(slow)]; n != 4 {
		t.Errorf("the slow version was validated %d times, want 4", n)
	}
	mu.Unlock()

	// A new version resets the count; a retry due when a version failing for its own reason
	// replaced it does not try that one again.
	writeFile(t, f.path("a"), withSection(plain, 3))
	f.eventFor("a", Reloaded, host.Hash(withSection(plain, 3)))
	mu.Lock()
	failFor[host.Hash(withSection(plain, 4))] = 1
	mu.Unlock()
	writeFile(t, f.path("a"), withSection(plain, 4))
	f.eventFor("a", Failed, host.Hash(withSection(plain, 4)))
	stale := ts.next(t, 2*time.Second)
	writeFile(t, f.path("a"), bad)
	f.eventFor("a", Failed, host.Hash(bad))
	ts.none(t)
	if s := f.status("a"); !s.RetryAt.IsZero() {
		t.Fatalf("a retry is due after a version's own failure: %+v", s)
	}
	stale.f()
	f.check("a", outSkipped)
	mu.Lock()
	if n := tries[host.Hash(bad)]; n != 1 {
		t.Errorf("the bad version was validated %d times, want 1", n)
	}
	mu.Unlock()
}
