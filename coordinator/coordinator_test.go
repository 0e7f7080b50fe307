package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/store"
)

// fakeClock only moves when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// fakeAllocator runs the built-in strategies' Go code: "averagely" and "circle". Its version
// can change, and it can be told to fail.
type fakeAllocator struct {
	mu      sync.Mutex
	calls   map[string]int
	version string
	fail    error
	last    *abi.Request
	// swap, when set, makes "averagely" answer as "circle" does: a plugin reload that changes
	// the answers.
	swap bool
}

func newFakeAllocator() *fakeAllocator {
	return &fakeAllocator{calls: map[string]int{}, version: "v1"}
}

func (f *fakeAllocator) Allocate(_ context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[plugin]++
	f.last = req
	if f.fail != nil {
		return nil, f.version, f.fail
	}
	strategy := averagely.Allocate
	switch {
	case plugin == "circle" || plugin == "averagely" && f.swap:
		strategy = circle.Allocate
	case plugin == "averagely":
	default:
		return nil, "", fmt.Errorf("plugin %q: not loaded", plugin)
	}
	resp := &abi.Response{}
	for i := range req.Consumers {
		resp.Results = append(resp.Results, abi.Result{Indices: strategy(nil, len(req.Queues), len(req.Consumers), i)})
	}
	return resp, f.version, nil
}

func (f *fakeAllocator) Calls(plugin string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[plugin]
}

type env struct {
	t     *testing.T
	c     *coordinator.Coordinator
	clock *fakeClock
	alloc *fakeAllocator
	store store.Store
	dir   string
	opts  coordinator.Options
	// handoff is the mode of the groups that group and orderly declare (the default when "").
	handoff coordinator.HandoffMode
}

const session = 10 * time.Second

func newEnv(t *testing.T, tweak ...func(*coordinator.Options)) *env {
	t.Helper()
	e := &env{t: t, clock: &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, alloc: newFakeAllocator(), dir: t.TempDir()}
	e.opts = coordinator.Options{Clock: e.clock, Allocator: e.alloc, SessionTimeout: session}
	for _, f := range tweak {
		f(&e.opts)
	}
	e.open()
	return e
}

// open (re)opens the store and a coordinator over it.
func (e *env) open() {
	e.t.Helper()
	st, err := store.Open(e.dir, store.Options{NoSync: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = st
	e.t.Cleanup(func() { st.Close() })
	opts := e.opts
	if opts.Store == nil {
		opts.Store = st
	}
	c, err := coordinator.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
}

func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.store.Close()
	e.open()
}

func (e *env) tick() { e.c.Tick(context.Background()) }

// advance moves the clock by d in steps of at most 100 ms, ticking after each, as Run would.
func (e *env) advance(d time.Duration) {
	for d > 0 {
		step := min(d, 100*time.Millisecond)
		e.clock.Advance(step)
		e.tick()
		d -= step
	}
}

func (e *env) topic(name string, queues int) {
	e.t.Helper()
	if _, _, err := e.c.PutTopic(name, []coordinator.Broker{{Name: "broker-a", ReadQueues: queues, WriteQueues: queues}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) group(name, strategy string) {
	e.t.Helper()
	if _, _, err := e.c.PutGroup(name, coordinator.Binding{Strategy: strategy, Handoff: e.handoff}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) hb(group, cid string, topics ...string) coordinator.Assignment {
	e.t.Helper()
	a, err := e.c.Heartbeat(group, coordinator.Heartbeat{CID: cid, Topics: topics})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) status(group string) coordinator.GroupStatus {
	e.t.Helper()
	s, err := e.c.Group(group)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) gen(group, topic string) int64 { return e.status(group).Topics[topic].Generation }

// ids lists the queue ids of queues.
func ids(qs []abi.Queue) []int32 {
	out := []int32{}
	for _, q := range qs {
		out = append(out, q.QueueID)
	}
	return out
}

func TestGenerationsChangeOnlyWithInputs(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 8)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.tick()
	if n := e.gen("g", "T"); n != 0 {
		t.Fatalf("generation %d published before the debounce window passed", n)
	}
	e.advance(coordinator.DefaultDebounce)
	if n := e.gen("g", "T"); n != 1 {
		t.Fatalf("generation %d after the debounce window, want 1", n)
	}
	a := e.hb("g", "c1", "T")
	if got := ids(a.Queues["T"]); !slices.Equal(got, []int32{0, 1, 2, 3}) || a.Generations["T"] != 1 {
		t.Fatalf("c1 has %v at generation %d, want [0 1 2 3] at 1", got, a.Generations["T"])
	}
	if got := ids(e.hb("g", "c2", "T").Queues["T"]); !slices.Equal(got, []int32{4, 5, 6, 7}) {
		t.Fatalf("c2 has %v, want [4 5 6 7]", got)
	}
	req := e.alloc.last
	if !slices.Equal(req.Consumers, []string{"c1", "c2"}) || len(req.Queues) != 8 || req.Group != "g" || req.Targets != nil {
		t.Fatalf("plugin request: %+v", req)
	}

	// Heartbeats that change nothing, an identical topic, a leave and rejoin inside the
	// window: no plugin call, no generation.
	for range 5 {
		e.hb("g", "c1", "T")
		e.hb("g", "c2", "T")
		e.advance(time.Second)
	}
	e.topic("T", 8)
	if _, err := e.c.Leave("g", "c2"); err != nil {
		t.Fatal(err)
	}
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if calls, n := e.alloc.Calls("averagely"), e.gen("g", "T"); calls != 1 || n != 1 {
		t.Fatalf("after no-op changes: %d plugin calls, generation %d; want 1, 1", calls, n)
	}

	// A label the strategy ignores: the plugin is asked, the number stays.
	if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}, Labels: map[string]string{"zone": "a", "weight": "3"}}); err != nil {
		t.Fatal(err)
	}
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if calls, n := e.alloc.Calls("averagely"), e.gen("g", "T"); calls != 2 || n != 1 {
		t.Fatalf("after a label change: %d plugin calls, generation %d; want 2, 1", calls, n)
	}
	if attrs := e.alloc.last.ConsumerAttrs; attrs[0].Labels["zone"] != "a" || attrs[0].Metrics["weight"] != 3 {
		t.Fatalf("consumer attributes %+v, want zone=a and the weight metric", attrs)
	}
	if prev := e.alloc.last.PrevOwners; !slices.Equal(prev, []string{"c1", "c1", "c1", "c1", "c2", "c2", "c2", "c2"}) {
		t.Fatalf("previous owners %v", prev)
	}

	// More read queues: a new generation.
	e.topic("T", 12)
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	if n := e.gen("g", "T"); n != 2 {
		t.Fatalf("after adding queues generation %d, want 2", n)
	}
	if got := ids(e.hb("g", "c2", "T").Queues["T"]); !slices.Equal(got, []int32{6, 7, 8, 9, 10, 11}) {
		t.Fatalf("c2 has %v after growth", got)
	}
}

func TestRollingRestartCoalesces(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.SessionTimeout = time.Minute })
	e.topic("T", 64)
	e.group("g", "averagely")
	for i := range 100 {
		e.hb("g", fmt.Sprintf("c%03d", i), "T")
	}
	e.advance(time.Second)
	if n, calls := e.gen("g", "T"), e.alloc.Calls("averagely"); n != 1 || calls != 1 {
		t.Fatalf("100 joins gave generation %d after %d calls, want 1 after 1", n, calls)
	}
	// Each consumer restarts under a new client id, 20 ms after the previous one.
	for i := range 100 {
		if _, err := e.c.Leave("g", fmt.Sprintf("c%03d", i)); err != nil {
			t.Fatal(err)
		}
		e.hb("g", fmt.Sprintf("r%03d", i), "T")
		e.clock.Advance(20 * time.Millisecond)
		e.tick()
	}
	e.advance(time.Second)
	if n, calls := e.gen("g", "T"), e.alloc.Calls("averagely"); n != 2 || calls != 2 {
		t.Fatalf("a rolling restart of 100 consumers gave generation %d after %d calls, want 2 after 2", n, calls)
	}
	if s := e.status("g"); len(s.Members) != 100 || len(s.Topics["T"].Assignment) != 100 || s.Topics["T"].Pending {
		t.Fatalf("after the restart: %d members, %d in the assignment, pending %v", len(s.Members), len(s.Topics["T"].Assignment), s.Topics["T"].Pending)
	}
}

func TestMaxDelayBoundsAStreamOfChanges(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.SessionTimeout = time.Hour; o.MaxDelay = 2 * time.Second })
	e.topic("T", 8)
	e.group("g", "averagely")
	// A join every 100 ms for 5 s never leaves a quiet 200 ms window.
	for i := range 50 {
		e.hb("g", fmt.Sprintf("c%02d", i), "T")
		e.advance(100 * time.Millisecond)
	}
	if n := e.gen("g", "T"); n < 2 || n > 3 {
		t.Fatalf("5 s of changes with MaxDelay 2 s gave %d generations, want 2 or 3", n)
	}
}

func TestStaticMemberRestartKeepsItsQueues(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 6)
	e.group("g", "averagely")
	join := func(cid, instance string) (coordinator.Assignment, error) {
		return e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, InstanceID: instance, Topics: []string{"T"}})
	}
	for i, inst := range []string{"pod-0", "pod-1", "pod-2"} {
		if _, err := join(fmt.Sprintf("10.0.0.%d@1", i), inst); err != nil {
			t.Fatal(err)
		}
	}
	e.advance(time.Second)
	before, _ := join("10.0.0.1@1", "pod-1")
	if got := ids(before.Queues["T"]); !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("pod-1 has %v, want [2 3]", got)
	}
	if req := e.alloc.last; !slices.Equal(req.Consumers, []string{"pod-0", "pod-1", "pod-2"}) {
		t.Fatalf("the strategy saw consumers %v, want the instance ids", req.Consumers)
	}
	// pod-1 restarts: a new client id, the same instance id.
	after, err := join("10.0.0.9@7", "pod-1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(after.Queues["T"]), ids(before.Queues["T"])) || after.Generations["T"] != 1 {
		t.Fatalf("restarted pod-1 has %v at generation %d, want %v at 1", ids(after.Queues["T"]), after.Generations["T"], ids(before.Queues["T"]))
	}
	for range 3 {
		for i, inst := range []string{"pod-0", "pod-2"} {
			join(fmt.Sprintf("10.0.0.%d@1", i*2), inst)
		}
		join("10.0.0.9@7", "pod-1")
		e.advance(time.Second)
	}
	if n, calls := e.gen("g", "T"), e.alloc.Calls("averagely"); n != 1 || calls != 1 {
		t.Fatalf("after a static restart: generation %d, %d plugin calls; want 1, 1", n, calls)
	}
	s := e.status("g")
	if _, ok := s.Topics["T"].Assignment["10.0.0.9@7"]; !ok || len(s.Members) != 3 {
		t.Fatalf("status after the restart: %+v", s)
	}
	// The old process, if it still runs, is fenced rather than allowed to take the place back.
	_, err = join("10.0.0.1@1", "pod-1")
	if coordinator.KindOf(err) != coordinator.KindConflict {
		t.Fatalf("the replaced client id heartbeats: %v, want a conflict", err)
	}
	// The strategy knows members by key (instance id, else client id): a dynamic member's
	// client id may not equal a static member's instance id, nor the other way round.
	if _, err := join("pod-0", ""); coordinator.KindOf(err) != coordinator.KindConflict {
		t.Fatalf("a client id equal to an instance id: %v, want a conflict", err)
	}
	e.hb("g", "dyn@1", "T")
	if _, err := join("x", "dyn@1"); coordinator.KindOf(err) != coordinator.KindConflict {
		t.Fatalf("an instance id equal to a client id: %v, want a conflict", err)
	}
}

func TestPluginFailureKeepsThePreviousGeneration(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	e.alloc.mu.Lock()
	e.alloc.fail = errors.New("plugin \"averagely\": trap: unreachable")
	e.alloc.mu.Unlock()
	e.hb("g", "c2", "T")
	e.advance(300 * time.Millisecond)
	s := e.status("g").Topics["T"]
	if s.Generation != 1 || s.Failures != 1 || s.Error == "" || !s.Pending || s.State != model.StatePluginFailing {
		t.Fatalf("after a failure: %+v; want generation 1 kept, the failure reported", s)
	}
	if st := e.c.Groups()[0].State; st != model.StatePluginFailing {
		t.Fatalf("the group list says %q after a failure, want plugin-failing", st)
	}
	if got := ids(e.hb("g", "c1", "T").Queues["T"]); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("c1 has %v during the failure, want its previous queues", got)
	}
	// Retries back off: 1 s, then 2 s.
	e.advance(time.Second)
	if f := e.status("g").Topics["T"].Failures; f != 2 {
		t.Fatalf("%d failures after the first retry, want 2", f)
	}
	e.alloc.mu.Lock()
	e.alloc.fail = nil
	e.alloc.mu.Unlock()
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(2 * time.Second)
	s = e.status("g").Topics["T"]
	if s.Generation != 2 || s.Failures != 0 || s.Error != "" || s.Pending || s.State != model.StateStable {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestUnknownPluginIsReported(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "nosuch")
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	if s := e.status("g").Topics["T"]; s.Generation != 0 || s.Error == "" {
		t.Fatalf("status %+v, want no generation and an error", s)
	}
}

func TestBroadcastingAndMessageDelivery(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 3)
	for name, b := range map[string]coordinator.Binding{
		"bc":  {Model: coordinator.Broadcasting},
		"msg": {Strategy: "averagely", Delivery: coordinator.MessageDelivery},
	} {
		if _, _, err := e.c.PutGroup(name, b); err != nil {
			t.Fatal(err)
		}
		e.hb(name, "c1", "T")
		e.hb(name, "c2", "T")
	}
	e.advance(time.Second)
	for _, name := range []string{"bc", "msg"} {
		for _, cid := range []string{"c1", "c2"} {
			if got := ids(e.hb(name, cid, "T").Queues["T"]); !slices.Equal(got, []int32{0, 1, 2}) {
				t.Errorf("%s/%s has %v, want every queue", name, cid, got)
			}
		}
	}
	if calls := e.alloc.Calls("averagely"); calls != 0 {
		t.Fatalf("%d plugin calls for groups that need none", calls)
	}
}

func TestSessionExpiryDropsAMember(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	// c1 keeps beating; c2 falls silent.
	for range 12 {
		e.hb("g", "c1", "T")
		e.advance(time.Second)
	}
	s := e.status("g")
	if len(s.Members) != 1 || s.Members[0].CID != "c1" {
		t.Fatalf("members after c2's session ran out: %+v", s.Members)
	}
	if s.Topics["T"].Generation != 2 {
		t.Fatalf("generation %d, want 2", s.Topics["T"].Generation)
	}
	if got := ids(e.hb("g", "c1", "T").Queues["T"]); !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Fatalf("c1 has %v, want every queue", got)
	}
}

func TestPreviewChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	p, err := e.c.Preview(context.Background(), "g", coordinator.Binding{Strategy: "circle"})
	if err != nil {
		t.Fatal(err)
	}
	tp := p.Topics["T"]
	if tp.Generation != 1 || tp.Error != "" {
		t.Fatalf("preview %+v", tp)
	}
	// averagely: c1 [0 1], c2 [2 3]; circle: c1 [0 2], c2 [1 3]: queues 1 and 2 swap.
	want := []coordinator.Move{
		{Queue: abi.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 1}, From: "c1", To: "c2"},
		{Queue: abi.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 2}, From: "c2", To: "c1"},
	}
	if !slices.Equal(tp.Moves, want) {
		t.Fatalf("moves %+v, want %+v", tp.Moves, want)
	}
	if tp.Counts["c1"] != (coordinator.Count{Current: 2, Proposed: 2}) {
		t.Fatalf("counts %+v", tp.Counts)
	}
	e.advance(time.Second)
	after := e.status("g")
	if after.Strategy != "averagely" || after.Topics["T"].Generation != 1 || after.Topics["T"].Pending {
		t.Fatalf("preview changed the group: %+v", after)
	}
	if _, err := e.c.Preview(context.Background(), "g", coordinator.Binding{Model: "weird"}); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Fatalf("preview of a bad binding: %v", err)
	}
}

func TestRebindAndReload(t *testing.T) {
	e := newEnv(t)
	e.handoff = coordinator.HandoffEager // the members confirm nothing: see handoff_test.go
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	e.group("g", "circle")
	e.advance(time.Second)
	if got := ids(e.hb("g", "c1", "T").Queues["T"]); !slices.Equal(got, []int32{0, 2}) || e.gen("g", "T") != 2 {
		t.Fatalf("after binding circle c1 has %v at generation %d", got, e.gen("g", "T"))
	}
	e.group("g", "averagely")
	e.advance(time.Second)
	// A reload announced with the same version changes nothing; a new one that answers
	// differently publishes a new generation.
	e.c.PluginChanged("averagely", "v1")
	e.advance(time.Second)
	calls := e.alloc.Calls("averagely")
	e.alloc.mu.Lock()
	e.alloc.version, e.alloc.swap = "v2", true
	e.alloc.mu.Unlock()
	e.c.PluginChanged("averagely", "v2")
	e.c.PluginChanged("circle", "v2") // no group is bound to it now
	e.advance(time.Second)
	if got := e.alloc.Calls("averagely"); got != calls+1 {
		t.Fatalf("%d calls after the reload, want %d", got, calls+1)
	}
	if s := e.status("g").Topics["T"]; s.Generation != 4 || s.PluginVersion != "v2" {
		t.Fatalf("after the reload: %+v", s)
	}
}

func TestLongPollWakesOnNewGeneration(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	a, ch, err := e.c.Poll("g", "c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Newer(0) {
		t.Fatalf("a generation before any was computed: %+v", a)
	}
	select {
	case <-ch:
		t.Fatal("woken before a change")
	default:
	}
	e.advance(time.Second)
	select {
	case <-ch:
	default:
		t.Fatal("not woken by generation 1")
	}
	a, ch, _ = e.c.Poll("g", "c1", []string{"T"})
	if !a.Newer(0) || a.Newer(1) {
		t.Fatalf("poll after generation 1: %+v", a)
	}
	if _, _, err := e.c.Poll("g", "nobody", nil); coordinator.KindOf(err) != coordinator.KindNotFound {
		t.Fatalf("poll of an unknown member: %v", err)
	}
	if err := e.c.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("not woken by the group's deletion")
	}
	_, ch, _ = e.c.Poll("nosuch", "c1", nil)
	if ch != nil {
		t.Fatal("a channel for an unknown group")
	}
	e.group("h", "averagely")
	e.hb("h", "c1", "T")
	e.c.Close()
	select {
	case <-e.c.Done():
	default:
		t.Fatal("Done not closed by Close")
	}
	// A long-poll woken by Close still gets its answer.
	if _, _, err := e.c.Poll("h", "c1", nil); err != nil {
		t.Fatalf("poll after Close: %v", err)
	}
}

func TestRestartKeepsGenerationsDuringGrace(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 6)
	e.group("g", "averagely")
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.hb("g", cid, "T")
	}
	e.advance(time.Second)
	e.hb("g", "c3", "T")
	e.c.Leave("g", "c3")
	e.hb("g", "c3", "T")
	e.advance(time.Second)
	want := e.status("g").Topics["T"]
	if want.Generation != 1 {
		t.Fatalf("generation %d before the restart", want.Generation)
	}
	calls := e.alloc.Calls("averagely")

	e.restart()
	e.c.PluginChanged("averagely", "v1")
	if until, active := e.c.Grace(); !active || !until.Equal(e.clock.Now().Add(session)) {
		t.Fatalf("grace %v active %v after a restart", until, active)
	}
	if got := e.status("g"); len(got.Members) != 0 || got.Topics["T"].Generation != 1 {
		t.Fatalf("after the restart: %+v", got)
	}
	// Members come back one by one; until all have, nothing is published, and each gets its
	// queues of generation 1 at once.
	a := e.hb("g", "c2", "T")
	if got := ids(a.Queues["T"]); !slices.Equal(got, []int32{2, 3}) || a.Generations["T"] != 1 {
		t.Fatalf("c2 after the restart has %v at generation %d", got, a.Generations["T"])
	}
	e.advance(2 * time.Second)
	if s := e.status("g").Topics["T"]; s.Generation != 1 || !s.Held || s.State != model.StateHeld {
		t.Fatalf("while c1 and c3 are away: %+v, want generation 1 held", s)
	}
	if st := e.c.Groups()[0].State; st != model.StateHeld {
		t.Fatalf("the group list says %q while c1 and c3 are away, want held", st)
	}
	e.hb("g", "c1", "T")
	e.hb("g", "c3", "T")
	e.advance(time.Second)
	if s := e.status("g").Topics["T"]; s.Generation != 1 || s.Pending || s.Held || s.State != model.StateStable {
		t.Fatalf("when all came back: %+v", s)
	}
	if got := e.alloc.Calls("averagely"); got != calls {
		t.Fatalf("%d plugin calls after a clean restart, want %d", got, calls)
	}

	// Restart again; this time c3 never comes back: generation 2 comes once the grace ends.
	e.restart()
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(session / 2)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	if n := e.gen("g", "T"); n != 1 {
		t.Fatalf("generation %d before the grace ended", n)
	}
	e.advance(session/2 + time.Second)
	if n := e.gen("g", "T"); n != 2 {
		t.Fatalf("generation %d after the grace, want 2", n)
	}
}

// failingStore fails writes on demand.
type failingStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
}

func (f *failingStore) failing() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("write /data/allocd.db: no space left on device")
	}
	return nil
}

func (f *failingStore) set(v bool) { f.mu.Lock(); f.fail = v; f.mu.Unlock() }

func (f *failingStore) PutTopic(t store.Topic) error {
	if err := f.failing(); err != nil {
		return err
	}
	return f.Store.PutTopic(t)
}

func (f *failingStore) PutGroup(g store.Group) error {
	if err := f.failing(); err != nil {
		return err
	}
	return f.Store.PutGroup(g)
}

func (f *failingStore) PutGenerations(gens ...store.Generation) error {
	if err := f.failing(); err != nil {
		return err
	}
	return f.Store.PutGenerations(gens...)
}

func TestStoreFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	bolt, err := store.Open(dir, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	fs := &failingStore{Store: bolt}
	e := newEnv(t, func(o *coordinator.Options) { o.Store = fs })
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.advance(time.Second)

	fs.set(true)
	_, _, err = e.c.PutTopic("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 8}})
	if coordinator.KindOf(err) != coordinator.KindStorage {
		t.Fatalf("PutTopic on a full disk: %v, want a storage error", err)
	}
	if tp, _ := e.c.Topic("T"); tp.Brokers[0].ReadQueues != 4 {
		t.Fatalf("the failed write changed the topic in memory: %+v", tp)
	}
	if _, _, err := e.c.PutGroup("g", coordinator.Binding{Strategy: "circle"}); coordinator.KindOf(err) != coordinator.KindStorage {
		t.Fatalf("PutGroup on a full disk: %v", err)
	}
	if s := e.status("g"); s.Strategy != "averagely" {
		t.Fatalf("the failed write changed the binding: %+v", s.Group)
	}
	// A generation that cannot be stored is not published.
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if s := e.status("g").Topics["T"]; s.Generation != 1 || s.Error == "" {
		t.Fatalf("with the store failing: %+v", s)
	}
	fs.set(false)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(3 * time.Second)
	if s := e.status("g").Topics["T"]; s.Generation != 2 || s.Error != "" {
		t.Fatalf("after the store recovered: %+v", s)
	}
}

func TestTopicAndGroupLifecycle(t *testing.T) {
	e := newEnv(t)
	if _, created, err := e.c.PutTopic("T", []coordinator.Broker{{Name: "b", ReadQueues: 2, WriteQueues: 1}, {Name: "a", ReadQueues: 2, WriteQueues: 2}}); err != nil || !created {
		t.Fatalf("PutTopic: created %v, %v", created, err)
	}
	route, err := e.c.Route("T")
	if err != nil {
		t.Fatal(err)
	}
	if want := []abi.Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}, {Topic: "T", BrokerName: "b", QueueID: 0}}; !slices.Equal(route, want) {
		t.Fatalf("route %v, want %v", route, want)
	}
	// Write queues above read queues would strand messages: refused.
	if _, _, err := e.c.PutTopic("W", []coordinator.Broker{{Name: "a", ReadQueues: 1, WriteQueues: 8}}); coordinator.KindOf(err) != coordinator.KindInvalid || !strings.Contains(err.Error(), "queues 1-7, which no consumer reads") {
		t.Fatalf("PutTopic with writeQueues above readQueues: %v", err)
	}
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	if err := e.c.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	a := e.hb("g", "c1", "T")
	if len(a.Queues["T"]) != 0 || a.Generations["T"] != 2 {
		t.Fatalf("after the topic's deletion: %+v", a)
	}
	if err := e.c.DeleteTopic("T"); coordinator.KindOf(err) != coordinator.KindNotFound {
		t.Fatalf("second DeleteTopic: %v", err)
	}
	if _, err := e.c.Heartbeat("nosuch", coordinator.Heartbeat{CID: "c"}); coordinator.KindOf(err) != coordinator.KindNotFound {
		t.Fatalf("heartbeat to an unknown group: %v", err)
	}
	if left, err := e.c.Leave("g", "stranger"); left || err != nil {
		t.Fatalf("Leave of a stranger: %v, %v", left, err)
	}
	if gs := e.c.Groups(); len(gs) != 1 || gs[0].Members != 1 {
		t.Fatalf("Groups() = %+v", gs)
	}
	if !e.c.StrategyInUse("averagely") || e.c.StrategyInUse("hash") {
		t.Fatal("StrategyInUse is wrong")
	}
}

// Heartbeats naming topics that were never declared left a (group, topic) record each, stored
// and logged, never removed: 130 rounds of 1,024 random names grew the store to 50 MB. A member
// may subscribe to a topic not declared yet (it gets nothing until the topic exists), but that
// state is not stored, goes with its last member, and is bounded per group.
func TestSubscriptionsToUndeclaredTopics(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.MaxPendingTopics = 8 })
	e.group("g", "averagely")
	for round := range 5 {
		topics := make([]string, 8)
		for i := range topics {
			topics[i] = fmt.Sprintf("U%d-%d", round, i)
		}
		a := e.hb("g", "c1", topics...)
		if a.Generations[topics[0]] != 0 || len(a.Queues[topics[0]]) != 0 {
			t.Fatalf("assignment of an undeclared topic: %+v", a)
		}
		e.advance(time.Second)
		if st := e.status("g").State; st != model.StateStable {
			t.Fatalf("a group waiting for its topics to be declared is %q, want stable (nothing to compute)", st)
		}
		if _, err := e.c.Leave("g", "c1"); err != nil {
			t.Fatal(err)
		}
		e.advance(time.Second)
	}
	if n := len(e.status("g").Topics); n != 0 {
		t.Fatalf("after the members left, the group has %d topics: %v", n, e.status("g").Topics)
	}
	gens, err := e.store.ListGenerations()
	if err != nil || len(gens) != 0 {
		t.Fatalf("stored generations: %v, %v", gens, err)
	}

	// Past the bound, a heartbeat is refused and changes nothing.
	e.hb("g", "c1", "A1", "A2", "A3", "A4", "A5")
	e.hb("g", "c2", "A4", "A5", "A6", "A7", "A8")
	_, err = e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c3", Topics: []string{"A1", "A9"}})
	if coordinator.KindOf(err) != coordinator.KindConflict || !strings.Contains(err.Error(), "8") || !strings.Contains(err.Error(), "not declared") {
		t.Fatalf("heartbeat past the bound: %v", err)
	}
	if n := len(e.status("g").Members); n != 2 {
		t.Fatalf("the refused heartbeat joined a member: %d members", n)
	}
	// Declared topics do not count, and a topic that comes gives its subscribers their queues.
	e.topic("A9", 4)
	e.hb("g", "c3", "A1", "A9")
	e.advance(time.Second)
	if a := e.hb("g", "c3", "A1", "A9"); len(a.Queues["A9"]) == 0 || a.Generations["A9"] == 0 {
		t.Fatalf("c3 after A9 was declared: %+v", a)
	}
	e.topic("A1", 4)
	e.advance(time.Second)
	if a := e.hb("g", "c1", "A1", "A2", "A3", "A4", "A5"); a.Generations["A1"] == 0 {
		t.Fatalf("c1 after A1 was declared: %+v", a)
	}
	gens, _ = e.store.ListGenerations()
	for _, g := range gens {
		if g.Topic != "A1" && g.Topic != "A9" {
			t.Errorf("a generation of undeclared topic %q was stored", g.Topic)
		}
	}
}
