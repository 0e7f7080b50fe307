package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// pollGate passes requests to e's daemon and counts the batched polls it holds: requests
// (POST /v1/assignments), the polls in those being served, and the largest batch seen.
type pollGate struct {
	*httptest.Server
	requests, held, largest, cancelled atomic.Int64
}

func newPollGate(t *testing.T, e *env) *pollGate {
	g := &pollGate{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/assignments" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct{ Polls []json.RawMessage }
			json.Unmarshal(body, &req)
			n := int64(len(req.Polls))
			g.requests.Add(1)
			for m := g.largest.Load(); n > m && !g.largest.CompareAndSwap(m, n); m = g.largest.Load() {
			}
			g.held.Add(n)
			defer g.held.Add(-n)
			defer func() {
				if r.Context().Err() != nil {
					g.cancelled.Add(1)
				}
			}()
		}
		e.ts.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// join heartbeats members c000.. into group g and waits for the first generation that holds
// them all: one that gives the last member queues. (An earlier generation, published while the
// others were still joining, would answer the tests' polls at once.)
func join(t *testing.T, c *client.Client, group string, members int) int64 {
	t.Helper()
	ctx := context.Background()
	for i := range members {
		if _, err := c.Heartbeat(ctx, group, client.Heartbeat{CID: fmt.Sprintf("c%03d", i), Topics: []string{"T"}}); err != nil {
			t.Fatal(err)
		}
	}
	var gen int64
	last := fmt.Sprintf("c%03d", members-1)
	waitFor(t, func() bool {
		a, err := c.PollAssignment(ctx, group, last, "T", 0, 0)
		gen = a.Generations["T"]
		return err == nil && gen > 0 && len(a.Queues["T"]) > 0
	})
	return gen
}

// twoGroups adds group h beside e's group g and joins members c000.. to each; it returns their
// first generations.
func twoGroups(t *testing.T, e *env, members int) (genG, genH int64) {
	t.Helper()
	if _, err := e.c.PutGroup(context.Background(), "h", client.Binding{Strategy: "averagely"}); err != nil {
		t.Fatal(err)
	}
	return join(t, e.c, "g", members), join(t, e.c, "h", members)
}

type pollResult struct {
	a   client.MemberAssignment
	err error
}

// pollAll long-polls members c000.. of group after gen, each in a goroutine of its own.
func pollAll(c *client.Client, group string, members int, gen int64, wait time.Duration) []chan pollResult {
	out := make([]chan pollResult, members)
	for i := range members {
		out[i] = make(chan pollResult, 1)
		go func() {
			a, err := c.PollAssignment(context.Background(), group, fmt.Sprintf("c%03d", i), "T", gen, wait)
			out[i] <- pollResult{a, err}
		}()
	}
	return out
}

func result(t *testing.T, ch chan pollResult) pollResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the long-poll within 10 s")
		return pollResult{}
	}
}

// The long-polls of a Client's members share requests of at most client.MaxPollBatch polls;
// a new generation answers each with its own member's assignment.
func TestPollsShareARequest(t *testing.T) {
	e := newEnv(t)
	e.setup(256)
	const members = 100
	gen := join(t, e.c, "g", members)
	gate := newPollGate(t, e)
	c := client.New(gate.URL)
	alone := e.count("GET", "/v1/groups/g/assignment")
	polls := pollAll(c, "g", members, gen, 30*time.Second)
	waitFor(t, func() bool { return gate.held.Load() == members })
	if n, most := gate.requests.Load(), gate.largest.Load(); n > members/10 || most > client.MaxPollBatch {
		t.Errorf("%d polls held in %d requests, the largest of %d; want at most %d requests of at most %d", members, n, most, members/10, client.MaxPollBatch)
	}
	if _, err := e.c.Heartbeat(context.Background(), "g", client.Heartbeat{CID: "new", Topics: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	seen := map[client.Queue]string{}
	for i := range members {
		r := result(t, polls[i])
		if r.err != nil || r.a.Generations["T"] <= gen {
			t.Fatalf("member %d: %+v, %v", i, r.a, r.err)
		}
		for _, q := range r.a.Queues["T"] {
			if other, ok := seen[q]; ok {
				t.Fatalf("queue %v given to c%03d and %s", q, i, other)
			}
			seen[q] = fmt.Sprintf("c%03d", i)
		}
	}
	if n := e.count("GET", "/v1/groups/g/assignment") - alone; n != 0 {
		t.Errorf("%d long-polls sent alone, want none", n)
	}
}

// A poll answered in a batch returns; the others of its request go again and keep waiting for
// their own member's change. Each keeps its own wait.
func TestBatchedPollsWaitForTheirOwnChange(t *testing.T) {
	e := newEnv(t)
	e.setup(16)
	ctx := context.Background()
	genG, genH := twoGroups(t, e, 2)
	gate := newPollGate(t, e)
	c := client.New(gate.URL)
	g, h := pollAll(c, "g", 2, genG, 30*time.Second), pollAll(c, "h", 2, genH, 30*time.Second)
	waitFor(t, func() bool { return gate.held.Load() == 4 })
	if _, err := e.c.Heartbeat(ctx, "h", client.Heartbeat{CID: "new", Topics: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range h {
		if r := result(t, ch); r.err != nil || r.a.Generations["T"] <= genH {
			t.Fatalf("h's member: %+v, %v", r.a, r.err)
		}
	}
	waitFor(t, func() bool { return gate.held.Load() == 2 }) // g's two polls, sent again
	for _, ch := range g {
		select {
		case r := <-ch:
			t.Fatalf("g's member answered on h's change: %+v, %v", r.a, r.err)
		default:
		}
	}
	if _, err := e.c.Heartbeat(ctx, "g", client.Heartbeat{CID: "new", Topics: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range g {
		if r := result(t, ch); r.err != nil || r.a.Generations["T"] <= genG {
			t.Fatalf("g's member: %+v, %v", r.a, r.err)
		}
	}

	// A short wait among long ones answers when it ends, with the unchanged assignment.
	genG, _ = mustPoll(t, e.c, "g")
	long := pollAll(c, "g", 1, genG, 30*time.Second)
	start := time.Now()
	short, err := c.PollAssignment(ctx, "g", "c001", "T", genG, 200*time.Millisecond)
	if took := time.Since(start); err != nil || short.Generations["T"] != genG || took < 200*time.Millisecond || took > 5*time.Second {
		t.Fatalf("short poll: %+v, %v after %v", short, err, took)
	}
	select {
	case r := <-long[0]:
		t.Fatalf("the long poll answered with the short one: %+v, %v", r.a, r.err)
	default:
	}
}

// A poll sent again after another poll of its request was answered keeps what was left of its
// own wait: it answers when that wait ends, not a whole wait after the other's answer.
func TestBatchedPollKeepsItsWait(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	ctx := context.Background()
	genG, genH := twoGroups(t, e, 1)
	gate := newPollGate(t, e)
	c := client.New(gate.URL)
	const wait = time.Second
	start := time.Now()
	short := make(chan pollResult, 1)
	go func() {
		a, err := c.PollAssignment(ctx, "g", "c000", "T", genG, wait)
		short <- pollResult{a, err}
	}()
	h := pollAll(c, "h", 1, genH, 30*time.Second)
	waitFor(t, func() bool { return gate.held.Load() == 2 })
	// The other poll is answered half-way through this one's wait (the daemon's waits are real time).
	time.Sleep(wait / 2)
	if _, err := e.c.Heartbeat(ctx, "h", client.Heartbeat{CID: "new", Topics: []string{"T"}}); err != nil {
		t.Fatal(err)
	}
	if r := result(t, h[0]); r.err != nil || r.a.Generations["T"] <= genH {
		t.Fatalf("h's member: %+v, %v", r.a, r.err)
	}
	r := result(t, short)
	took := time.Since(start)
	if r.err != nil || r.a.Generations["T"] != genG {
		t.Fatalf("g's member: %+v, %v", r.a, r.err)
	}
	// A whole wait again after h's answer would be 1.5 s or more.
	if took < wait || took > wait+wait/3 {
		t.Errorf("g's poll answered after %v, want its wait (%v)", took, wait)
	}
	if n := gate.requests.Load(); n < 2 {
		t.Errorf("%d requests: the poll was not sent again after h's answer", n)
	}
}

func mustPoll(t *testing.T, c *client.Client, group string) (int64, client.MemberAssignment) {
	t.Helper()
	a, err := c.PollAssignment(context.Background(), group, "c000", "T", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.Generations["T"], a
}

// A batched poll's error is the one it would have had alone; a poll whose context ends
// returns at once, and a request whose every poll was given up is cancelled.
func TestBatchedPollErrorsAndContext(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	gen := join(t, e.c, "g", 1)
	gate := newPollGate(t, e)
	c := client.New(gate.URL)
	ctx := context.Background()
	_, err := c.PollAssignment(ctx, "g", "nobody", "T", gen, 30*time.Second)
	var ae *client.Error
	if !client.IsNotFound(err) || !errors.As(err, &ae) || ae.Path != "/v1/groups/g/assignment" || ae.Method != "GET" {
		t.Fatalf("poll of a member the daemon does not know: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.PollAssignment(cctx, "g", "c000", "T", gen, 30*time.Second)
		done <- err
	}()
	waitFor(t, func() bool { return gate.held.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("poll whose context ended: %v", err)
	}
	waitFor(t, func() bool { return gate.cancelled.Load() == 1 && gate.held.Load() == 0 })
}

// A daemon from before poll batches answers POST /v1/assignments 404: the client sends every
// long-poll alone from then on. WithPollBatching(false) does so from the start.
func TestPollBatchingOff(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	gen := join(t, e.c, "g", 1)
	old, batches := e.oldDaemon("/v1/assignments")
	before := e.count("GET", "/v1/groups/g/assignment")
	for _, c := range []*client.Client{client.New(old.URL), client.New(e.ts.URL, client.WithPollBatching(false))} {
		for range 2 {
			a, err := c.PollAssignment(context.Background(), "g", "c000", "T", gen, 50*time.Millisecond)
			if err != nil || a.Generations["T"] != gen {
				t.Errorf("poll: %+v, %v", a, err)
			}
		}
	}
	if n, alone := batches.Load(), e.count("GET", "/v1/groups/g/assignment")-before; n != 1 || alone != 4 {
		t.Errorf("%d batch requests and %d polls alone, want 1 and 4", n, alone)
	}
}
