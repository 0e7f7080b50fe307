package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/allocd/allocd/client"
)

// Heartbeats sent while the batches in flight are busy wait for the next and share it; each
// gets its own member's answer.
func TestHeartbeatsShareABatch(t *testing.T) {
	e := newEnv(t)
	e.setup(64)
	const members = 100
	release := make(chan struct{})
	var batches, heldBeats atomic.Int64
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/heartbeats" {
			batches.Add(1)
			n := int64(len(batchedPaths(r)))
			if n > client.MaxBatch {
				t.Errorf("a batch of %d heartbeats, more than %d", n, client.MaxBatch)
			}
			select {
			case <-release:
			default:
				heldBeats.Add(n)
				<-release
			}
		}
		e.ts.Config.Handler.ServeHTTP(w, r)
	}))
	defer gate.Close()
	c := client.New(gate.URL)
	ctx := context.Background()
	answers := make([]client.MemberAssignment, members)
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			answers[i], errs[i] = c.Heartbeat(ctx, "g", client.Heartbeat{CID: fmt.Sprintf("c%03d", i), Topics: []string{"T"}})
		})
	}
	// Every heartbeat is in a batch the daemon holds (at most four) or waits for a place.
	waitFor(t, func() bool { return heldBeats.Load()+int64(c.PendingHeartbeats()) == members })
	held, waited := batches.Load(), int64(c.PendingHeartbeats())
	close(release)
	wg.Wait()
	for i := range members {
		if errs[i] != nil || answers[i].Generations == nil || answers[i].Queues == nil {
			t.Fatalf("member %d: %+v, %v", i, answers[i], errs[i])
		}
	}
	// Those that waited go in as few batches as client.MaxBatch allows.
	if n, after := batches.Load(), (waited+client.MaxBatch-1)/client.MaxBatch; held < 1 || held > 4 || n > held+after {
		t.Errorf("%d heartbeats in %d requests, %d of them held; want at most 4 held, then %d for the %d that waited (batches of at most %d)", members, n, held, after, waited, client.MaxBatch)
	}
	if n := e.count("POST", "/v1/groups/g/heartbeat"); n != members {
		t.Errorf("the daemon saw %d heartbeats, want %d", n, members)
	}
	st, err := e.c.GetGroup(ctx, "g")
	if err != nil || len(st.Members) != members {
		t.Fatalf("group after the heartbeats: %d members, %v", len(st.Members), err)
	}

	// A batched heartbeat's error is the one it would have had alone.
	_, err = c.Heartbeat(ctx, "nosuch", client.Heartbeat{CID: "c1"})
	var ae *client.Error
	if !client.IsNotFound(err) || !errors.As(err, &ae) || ae.Path != "/v1/groups/nosuch/heartbeat" {
		t.Fatalf("heartbeat to a group that does not exist: %v", err)
	}
}

// A daemon from before batches answers POST /v1/heartbeats 404: the client sends every
// heartbeat alone from then on.
func TestHeartbeatBatchingOffWithAnOldDaemon(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	old, batches := e.oldDaemon("/v1/heartbeats")
	c := client.New(old.URL)
	ctx := context.Background()
	for i := range 3 {
		a, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c1", Topics: []string{"T"}})
		if err != nil || a.Generations == nil {
			t.Fatalf("heartbeat %d: %+v, %v", i, a, err)
		}
	}
	if n, alone := batches.Load(), e.count("POST", "/v1/groups/g/heartbeat"); n != 1 || alone != 3 {
		t.Errorf("%d batch requests and %d heartbeats alone, want 1 and 3", n, alone)
	}
}

// WithHeartbeatBatching(false): every heartbeat is a request of its own.
func TestHeartbeatBatchingOff(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	c := client.New(e.ts.URL, client.WithHeartbeatBatching(false))
	ctx := context.Background()
	for range 2 {
		if _, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c1", Topics: []string{"T"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, alone := e.count("POST", "/v1/heartbeats"), e.count("POST", "/v1/groups/g/heartbeat"); n != 0 || alone != 2 {
		t.Errorf("%d batch requests and %d heartbeats alone, want 0 and 2", n, alone)
	}
}

// A heartbeat whose context ends while it waits for a batch returns at once with that error.
func TestBatchedHeartbeatContext(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	release := make(chan struct{})
	var held atomic.Int64
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/heartbeats" {
			held.Add(1)
			<-release
		}
		e.ts.Config.Handler.ServeHTTP(w, r)
	}))
	defer gate.Close()
	defer close(release)
	c := client.New(gate.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Heartbeat(ctx, "g", client.Heartbeat{CID: "c1", Topics: []string{"T"}})
		done <- err
	}()
	waitFor(t, func() bool { return held.Load() == 1 }) // sent, and held
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("heartbeat whose context ended: %v", err)
	}
}
