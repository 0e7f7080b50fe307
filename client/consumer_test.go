package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// never is a heartbeat interval no test reaches: changes can then only come by long-poll.
const never = time.Hour

func TestConsumerSplitAndLeave(t *testing.T) {
	e := newEnv(t)
	e.setup(8)
	ctx := context.Background()
	opts := client.ConsumerOptions{HeartbeatInterval: never}
	c1 := e.c.NewConsumer("g", "c1", []string{"T"}, opts)
	c2 := e.c.NewConsumer("g", "c2", []string{"T"}, opts)
	for _, c := range []*client.Consumer{c1, c2} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer c1.Close(ctx)
	a1 := until(t, c1.Assignments(), hasIDs(0, 1, 2, 3))
	a2 := until(t, c2.Assignments(), hasIDs(4, 5, 6, 7))
	if a1.Topic != "T" || a1.Generation != a2.Generation || a1.Generation < 1 {
		t.Fatalf("c1 %+v, c2 %+v", a1, a2)
	}
	if cur, ok := c1.Current("T"); !ok || cur.Generation != a1.Generation || !slices.Equal(ids(cur.Queues), []int32{0, 1, 2, 3}) {
		t.Fatalf("Current: %+v, %v", cur, ok)
	}
	if _, ok := c1.Current("other"); ok {
		t.Fatal("Current of a topic the consumer does not subscribe to")
	}

	// c2 leaves: c1 has everything by long-poll, long before any heartbeat.
	start := time.Now()
	if err := c2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-c2.Assignments(); ok {
		t.Fatal("c2's channel is open after Close")
	}
	a := until(t, c1.Assignments(), hasIDs(0, 1, 2, 3, 4, 5, 6, 7))
	if a.Generation != a1.Generation+1 {
		t.Fatalf("generation %d after the leave, want %d", a.Generation, a1.Generation+1)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the leave took %v to reach c1", took)
	}
	if e.count("POST", "/v1/groups/g/heartbeat") != 2 {
		t.Fatalf("%d heartbeats; want only the two joins", e.count("POST", "/v1/groups/g/heartbeat"))
	}
	st, _ := e.c.GetGroup(ctx, "g")
	if len(st.Members) != 1 || st.Members[0].CID != "c1" {
		t.Fatalf("members after the leave: %+v", st.Members)
	}
}

func TestConsumerSlowReaderGetsTheLatest(t *testing.T) {
	e := newEnv(t)
	e.setup(2)
	ctx := context.Background()
	c := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	ch := c.Assignments()
	first := until(t, ch, hasIDs(0, 1))
	// Three new generations while nobody reads.
	for _, n := range []int{3, 4, 5} {
		if _, err := e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: n, WriteQueues: n}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { cur, _ := c.Current("T"); return len(cur.Queues) == n })
	}
	a := next(t, ch)
	if a.Generation != first.Generation+3 || len(a.Queues) != 5 {
		t.Fatalf("the slow reader got %+v, want generation %d with 5 queues", a, first.Generation+3)
	}
	select {
	case a := <-ch:
		t.Fatalf("a second assignment %+v after the latest", a)
	case <-time.After(100 * time.Millisecond):
	}
}

// send sends without blocking: a callback must not hold the consumer up.
func send[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// waitFor polls cond until it holds (at most 10s): for state that changes over the network,
// not on a timer.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestConsumerHeartbeatsRetriesAndKeepsItsQueues(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	ctx := context.Background()
	clock := newFakeClock()
	errs := make(chan error, 100)
	c := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{
		HeartbeatInterval: 3 * time.Second, RetryMin: 100 * time.Millisecond, DisableLongPoll: true, Clock: clock,
		Labels:  map[string]string{"zone": "a"},
		OnError: func(err error) { send(errs, err) },
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	<-e.beats // the join
	beat := func() {
		t.Helper()
		clock.WaitTimers(t, 1)
		clock.Advance(3 * time.Second)
		select {
		case <-e.beats:
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat after the interval")
		}
	}
	// The join answers generation 0; without long-polls, generation 1 comes with a heartbeat
	// once the daemon has computed it.
	waitFor(t, func() bool {
		st, _ := e.c.GetGroup(ctx, "g")
		return st.Topics["T"].Generation == 1
	})
	if _, ok := c.Current("T"); ok {
		t.Fatal("an assignment before the first generation reached the consumer")
	}
	beat()
	waitFor(t, func() bool { _, ok := c.Current("T"); return ok })
	if cur, _ := c.Current("T"); cur.Generation != 1 || len(cur.Queues) != 4 {
		t.Fatalf("after a heartbeat: %+v", cur)
	}
	// Assignments has not been called: the generation received counts as applied.
	beat()
	waitFor(t, func() bool {
		st, _ := e.c.GetGroup(ctx, "g")
		return len(st.Members) == 1 && st.Members[0].Generations["T"] == 1 && st.Members[0].Labels["zone"] == "a"
	})

	// The daemon goes down: the consumer retries after RetryMin, then twice that, and keeps its
	// queues.
	e.down.Store(true)
	before := e.count("POST", "/v1/groups/g/heartbeat")
	clock.WaitTimers(t, 1)
	clock.Advance(3 * time.Second)
	if err := <-errs; client.StatusCode(err) != http.StatusServiceUnavailable {
		t.Fatalf("OnError got %v", err)
	}
	clock.WaitTimers(t, 1)
	clock.Advance(100 * time.Millisecond) // the first retry waits 80-100ms
	<-errs
	clock.WaitTimers(t, 1)
	clock.Advance(200 * time.Millisecond)
	<-errs
	if got := e.count("POST", "/v1/groups/g/heartbeat") - before; got != 3 {
		t.Fatalf("%d heartbeats while down, want 3", got)
	}
	if cur, ok := c.Current("T"); !ok || cur.Generation != 1 || len(cur.Queues) != 4 {
		t.Fatalf("while the daemon is down: %+v, %v", cur, ok)
	}
	e.down.Store(false)
	clock.WaitTimers(t, 1)
	clock.Advance(400 * time.Millisecond)
	<-e.beats
	select {
	case err := <-errs:
		t.Fatalf("an error after the daemon came back: %v", err)
	default:
	}
}

func TestConsumerStaticMemberTakesOver(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	ctx := context.Background()
	errs := make(chan error, 100)
	old := e.c.NewConsumer("g", "host-a@1", []string{"T"}, client.ConsumerOptions{
		InstanceID: "i1", HeartbeatInterval: never, PollWait: 300 * time.Millisecond, OnError: func(err error) { send(errs, err) },
	})
	other := e.c.NewConsumer("g", "host-b@1", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never})
	for _, c := range []*client.Consumer{old, other} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
	}
	// Members are keyed by instance id: "host-b@1" < "i1".
	a := until(t, old.Assignments(), hasIDs(2, 3))

	// The instance restarts with a new client id: it takes the place at once, same generation.
	restarted := e.c.NewConsumer("g", "host-a@2", []string{"T"}, client.ConsumerOptions{InstanceID: "i1", HeartbeatInterval: never})
	if err := restarted.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer restarted.Close(ctx)
	if cur, ok := restarted.Current("T"); !ok || cur.Generation != a.Generation || !slices.Equal(ids(cur.Queues), []int32{2, 3}) {
		t.Fatalf("the restarted member has %+v, %v; want generation %d with queues 2, 3", cur, ok, a.Generation)
	}
	// The old one, fenced, is told so and lets its queues go: the restarted member holds them
	// now, and two members must never both work on a queue.
	for err := range errs {
		if client.IsConflict(err) {
			break
		}
	}
	if got := until(t, old.Assignments(), hasIDs()); got.Generation != a.Generation {
		t.Fatalf("the fenced member's last assignment %+v", got)
	}
	if cur, _ := old.Current("T"); len(cur.Queues) != 0 {
		t.Fatalf("the fenced member has %v", cur)
	}
}

func TestConsumerFollowsARecreatedGroup(t *testing.T) {
	e := newEnv(t)
	e.setup(2)
	ctx := context.Background()
	c := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never, RetryMin: 5 * time.Millisecond})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	ch := c.Assignments()
	until(t, ch, hasIDs(0, 1))
	for _, n := range []int{3, 4} {
		e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: n, WriteQueues: n}})
		until(t, ch, func(a client.Assignment) bool { return len(a.Queues) == n })
	}
	// Generation 3 now. The group is deleted and declared again: its numbers start over, and
	// the consumer follows them down rather than waiting for a number above 3.
	if err := e.c.DeleteGroup(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.PutGroup(ctx, "g", client.Binding{Strategy: "circle"}); err != nil {
		t.Fatal(err)
	}
	a := until(t, ch, func(a client.Assignment) bool { return a.Generation == 1 })
	if len(a.Queues) != 4 {
		t.Fatalf("after the group came back: %+v", a)
	}
}

func TestConsumerStartAndClose(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never})
	// An unknown group is a refusal retrying cannot fix: Start says so at once.
	if err := c.Start(ctx); !client.IsNotFound(err) || !strings.Contains(err.Error(), `group "g" not found`) {
		t.Fatalf("Start on an unknown group: %v", err)
	}
	e.setup(2)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start again once the group exists: %v", err)
	}
	if err := c.Start(ctx); err == nil {
		t.Fatal("Start twice succeeded")
	}
	until(t, c.Assignments(), hasIDs(0, 1))
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}

	// A daemon that answers 503 is retried until the context ends.
	e.down.Store(true)
	d := e.c.NewConsumer("g", "c2", []string{"T"}, client.ConsumerOptions{RetryMin: 5 * time.Millisecond})
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := d.Start(sctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down for the test") {
		t.Fatalf("Start against a daemon that is down: %v", err)
	}
	if n := e.count("POST", "/v1/groups/g/heartbeat"); n < 4 {
		t.Fatalf("only %d heartbeats; Start should retry", n)
	}
	// Closing a consumer that never ran closes its channel and sends nothing.
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-d.Assignments(); ok {
		t.Fatal("an assignment from a consumer that never ran")
	}
	// Close ends a Start that is still retrying.
	f := e.c.NewConsumer("g", "c3", []string{"T"}, client.ConsumerOptions{RetryMin: 5 * time.Millisecond})
	started := make(chan error, 1)
	go func() { started <- f.Start(ctx) }()
	before := e.count("POST", "/v1/groups/g/heartbeat")
	waitFor(t, func() bool { return e.count("POST", "/v1/groups/g/heartbeat") > before })
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-started; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Start when closed while retrying: %v", err)
	}
}
