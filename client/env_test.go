package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

type plugins struct{}

func (plugins) List() any { return []map[string]string{{"name": "averagely"}, {"name": "circle"}} }
func (plugins) Get(name string) (any, bool) {
	if name == "averagely" || name == "circle" {
		return map[string]string{"name": name, "activeHash": "h-" + name}, true
	}
	return nil, false
}

// env is the real coordinator and HTTP server in process, on the real clock with a short
// debounce, behind a switch that can make the daemon answer 503 (down) and a counter of the
// requests per route.
type env struct {
	t     *testing.T
	coord *coordinator.Coordinator
	ts    *httptest.Server
	c     *client.Client

	down   atomic.Bool
	mu     sync.Mutex
	counts map[string]int
	beats  chan string // the cid of every heartbeat that reached the server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, counts: map[string]int{}, beats: make(chan string, 10000)}
	e.coord, err = coordinator.New(coordinator.Options{
		Store: st, Allocator: nativestrategy.Allocator{}, SessionTimeout: 10 * time.Second,
		Debounce: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
		CheckStrategy: func(name string) error {
			if _, ok := (plugins{}).Get(name); !ok {
				return fmt.Errorf("no such plugin (loaded: averagely, circle)")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.coord.Run(ctx); close(done) }()
	srv, err := server.New(server.Options{Coordinator: e.coord, Plugins: plugins{}, MaxWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	e.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.Path
		// A batch of heartbeats counts as a heartbeat request of each member it carries.
		batched := batchedPaths(r)
		e.mu.Lock()
		e.counts[key]++
		for _, p := range batched {
			e.counts["POST "+p]++
		}
		e.mu.Unlock()
		defer func() {
			for _, p := range batched {
				select {
				case e.beats <- p:
				default:
				}
			}
		}()
		if e.down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"down for the test"}`))
			return
		}
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/heartbeat") {
			defer func() {
				select {
				case e.beats <- r.URL.Path:
				default:
				}
			}()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Drain()
		e.coord.Close()
		e.ts.Close()
		cancel()
		<-done
	})
	e.c = client.New(e.ts.URL, client.WithTimeout(5*time.Second))
	return e
}

// batchedPaths are the heartbeat paths of the members whose heartbeats r carries, if it is a
// batch (POST /v1/heartbeats); r's body is left to be read again.
func batchedPaths(r *http.Request) []string {
	if r.Method != "POST" || r.URL.Path != "/v1/heartbeats" {
		return nil
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct{ Heartbeats []struct{ Group string } }
	json.Unmarshal(body, &req)
	var paths []string
	for _, hb := range req.Heartbeats {
		paths = append(paths, "/v1/groups/"+hb.Group+"/heartbeat")
	}
	return paths
}

func (e *env) count(method, path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[method+" "+path]
}

// setup declares topic T with n queues on broker-a and group g bound to averagely.
func (e *env) setup(n int) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: n, WriteQueues: n}}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely"}); err != nil {
		e.t.Fatal(err)
	}
}

// next waits for the next assignment on ch.
func next(t *testing.T, ch <-chan client.Assignment) client.Assignment {
	t.Helper()
	select {
	case a, ok := <-ch:
		if !ok {
			t.Fatal("the assignment channel closed")
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no assignment within 10s")
	}
	panic("unreachable")
}

// until reads ch until an assignment satisfies ok, and returns it.
func until(t *testing.T, ch <-chan client.Assignment, ok func(client.Assignment) bool) client.Assignment {
	t.Helper()
	for {
		if a := next(t, ch); ok(a) {
			return a
		}
	}
}

func ids(qs []client.Queue) []int32 {
	out := []int32{}
	for _, q := range qs {
		out = append(out, q.QueueID)
	}
	return out
}

func hasIDs(want ...int32) func(client.Assignment) bool {
	return func(a client.Assignment) bool { return slices.Equal(ids(a.Queues), want) }
}

// fakeClock is a Clock whose time moves only when the test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{} // poked at every NewTimer
}

type fakeTimer struct {
	f  *fakeClock
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), added: make(chan struct{}, 1)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) client.Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	select {
	case f.added <- struct{}{}:
	default:
	}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if i := slices.Index(t.f.timers, t); i >= 0 {
		t.f.timers = slices.Delete(t.f.timers, i, i+1)
		return true
	}
	return false
}

// Advance moves the time by d and fires the timers that are due.
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(f.now.Add(d))
}

// AdvanceToNext moves the time to the earliest pending timer, if any, and fires the timers that
// are due then.
func (f *fakeClock) AdvanceToNext() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return
	}
	next := f.timers[0].at
	for _, t := range f.timers[1:] {
		if t.at.Before(next) {
			next = t.at
		}
	}
	f.advanceLocked(next)
}

func (f *fakeClock) advanceLocked(now time.Time) {
	f.now = now
	kept := f.timers[:0]
	for _, t := range f.timers {
		if t.at.After(f.now) {
			kept = append(kept, t)
			continue
		}
		t.c <- f.now
	}
	clear(f.timers[len(kept):])
	f.timers = kept
}

// WaitTimers waits until n timers are pending: the consumer's loops are waiting on the clock.
func (f *fakeClock) WaitTimers(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.timers)
		f.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-f.added:
		case <-time.After(5 * time.Millisecond): // a Stop does not poke
		case <-deadline:
			t.Fatalf("%d timers pending after 10s, want %d", got, n)
		}
	}
}

// oldDaemon is e's daemon as one from before the batch endpoint path: that path answers 404 as
// an unknown endpoint does. The counter is its requests.
func (e *env) oldDaemon(path string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			n.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no such endpoint: ` + path + ` (the API is under /v1)"}`))
			return
		}
		e.ts.Config.Handler.ServeHTTP(w, r)
	}))
	e.t.Cleanup(old.Close)
	return old, &n
}
