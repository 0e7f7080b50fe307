package coordinator_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/lock"
	"github.com/allocd/allocd/model"
)

// confirm sends a heartbeat of cid reporting it applied generation n of T, and returns its
// answer.
func (e *env) confirm(cid string, n int64) coordinator.Assignment {
	e.t.Helper()
	a, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, Topics: []string{"T"}, Generations: map[string]int64{"T": n}})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// told is what each member is told now, by client id.
func (e *env) told() map[string][]int32 {
	e.t.Helper()
	out := map[string][]int32{}
	for cid, qs := range e.status("g").Topics["T"].Assignment {
		out[cid] = ids(qs)
	}
	return out
}

func (e *env) history(limit int, before int64) coordinator.History {
	e.t.Helper()
	h, err := e.c.History("g", "T", limit, before)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *env) entry(n int64) coordinator.HistoryEntry {
	e.t.Helper()
	for _, en := range e.history(coordinator.MaxHistoryPage, 0).Entries {
		if en.Generation == n {
			return en
		}
	}
	e.t.Fatalf("generation %d is not in the history", n)
	return coordinator.HistoryEntry{}
}

// twoMembers sets up c1 alone on 4 queues, confirmed, then c2 joining: generation 2 holds
// queues 2 and 3 back for c2.
func twoMembers(t *testing.T, b coordinator.Binding, tweak ...func(*coordinator.Options)) *env {
	e := newEnv(t, tweak...)
	e.topic("T", 4)
	b.Strategy = "averagely"
	if _, _, err := e.c.PutGroup("g", b); err != nil {
		t.Fatal(err)
	}
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	e.confirm("c1", 1)
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	return e
}

func TestCooperativeJoinWaitsForTheConfirmation(t *testing.T) {
	e := twoMembers(t, coordinator.Binding{})
	if got := e.told(); !slices.Equal(got["c1"], []int32{0, 1}) || len(got["c2"]) != 0 || e.gen("g", "T") != 2 {
		t.Fatalf("generation %d tells %v; want c1 [0 1] and c2 nothing until c1 confirms", e.gen("g", "T"), got)
	}
	hs := e.status("g").Topics["T"].Handoffs
	if len(hs) != 2 || hs[0].From != "c1" || hs[0].To != "c2" || hs[0].Queue.QueueID != 2 || !hs[0].Deadline.Equal(hs[0].Since.Add(session)) {
		t.Fatalf("handoffs %+v", hs)
	}
	// A heartbeat of c1 that reports the old generation frees nothing.
	e.confirm("c1", 1)
	e.advance(time.Second)
	if e.gen("g", "T") != 2 {
		t.Fatal("a stale confirmation handed the queues over")
	}
	e.confirm("c1", 2)
	e.tick() // no debounce: the handoff is published at the next tick
	if got := e.told(); !slices.Equal(got["c2"], []int32{2, 3}) || e.gen("g", "T") != 3 || len(e.status("g").Topics["T"].Handoffs) != 0 {
		t.Fatalf("after c1 confirmed: generation %d tells %v", e.gen("g", "T"), got)
	}

	h := e.history(0, 0)
	if len(h.Entries) != 3 || h.Entries[0].Generation != 3 {
		t.Fatalf("history %+v", h)
	}
	g2, g3 := e.entry(2), e.entry(3)
	if !slices.Equal(g2.Trigger.Causes, []string{model.CauseJoined}) || !slices.Equal(g2.Trigger.Joined, []string{"c2"}) ||
		len(g2.Moves) != 2 || g2.Moves[0].From != "c1" || g2.Moves[0].To != "" || len(g2.Pending) != 2 || g2.Pending[0].To != "c2" {
		t.Fatalf("generation 2 in the history: %+v", g2)
	}
	if !slices.Equal(g3.Trigger.Causes, []string{model.CauseHandoff}) || len(g3.Trigger.Released) != 1 ||
		g3.Trigger.Released[0].Member != "c1" || g3.Trigger.Released[0].Reason != model.ReleaseConfirmed || len(g3.Trigger.Released[0].Queues) != 2 ||
		len(g3.Moves) != 2 || g3.Moves[1].From != "" || g3.Moves[1].To != "c2" || g3.Plugin != "averagely" || g3.PluginVersion != "v1" {
		t.Fatalf("generation 3 in the history: %+v", g3)
	}
	if e1 := e.entry(1); !slices.Equal(e1.Trigger.Causes, []string{model.CauseFirst, model.CauseJoined}) || e1.Handoff != coordinator.HandoffCooperative {
		t.Fatalf("generation 1 in the history: %+v", e1)
	}

	ex, err := e.c.Explain("g", "T", "broker-a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Owner != "c2" || ex.Generation != 3 || ex.Oldest != 1 || len(ex.Changes) != 3 ||
		ex.Changes[1].PendingTo != "c2" || !strings.Contains(ex.Changes[1].Summary, "held back for c2") ||
		!strings.Contains(ex.Changes[2].Summary, "c1 confirmed") {
		t.Fatalf("explain: %+v", ex)
	}
}

func TestEagerTellsEveryoneAtOnce(t *testing.T) {
	e := twoMembers(t, coordinator.Binding{Handoff: coordinator.HandoffEager})
	if got := e.told(); !slices.Equal(got["c2"], []int32{2, 3}) || e.gen("g", "T") != 2 || len(e.status("g").Topics["T"].Handoffs) != 0 {
		t.Fatalf("eager generation %d tells %v", e.gen("g", "T"), got)
	}
	if en := e.entry(2); en.Handoff != coordinator.HandoffEager || len(en.Moves) != 2 || en.Moves[0].From != "c1" || en.Moves[0].To != "c2" {
		t.Fatalf("history %+v", en)
	}
}

func TestCooperativeLeaveAndExpiryRelease(t *testing.T) {
	e := twoMembers(t, coordinator.Binding{})
	if _, err := e.c.Leave("g", "c1"); err != nil {
		t.Fatal(err)
	}
	e.tick()
	if got := e.told(); !slices.Equal(got["c2"], []int32{2, 3}) || e.gen("g", "T") != 3 {
		t.Fatalf("after c1 left: %v at %d", got, e.gen("g", "T"))
	}
	if r := e.entry(3).Trigger.Released; len(r) != 1 || r[0].Reason != model.ReleaseLeft {
		t.Fatalf("released %+v", r)
	}
	e.advance(time.Second)
	if got := e.told(); !slices.Equal(got["c2"], []int32{0, 1, 2, 3}) {
		t.Fatalf("after the recomputation: %v", got)
	}
	if tr := e.entry(4).Trigger; !slices.Equal(tr.Causes, []string{model.CauseLeft}) || !slices.Equal(tr.Left, []string{"c1"}) {
		t.Fatalf("generation 4 trigger %+v", tr)
	}

	// Expiry: c2 confirms what it has, then goes silent; c3 joins and gets c2's queues only
	// when c2's session ends.
	e.confirm("c2", e.gen("g", "T"))
	e.hb("g", "c3", "T")
	e.advance(time.Second)
	n := e.gen("g", "T")
	if got := e.told(); len(got["c3"]) != 0 {
		t.Fatalf("c3 told %v while c2 may hold everything", got)
	}
	for range 12 {
		e.hb("g", "c3", "T")
		e.advance(time.Second)
	}
	if got := e.told(); !slices.Equal(got["c3"], []int32{0, 1, 2, 3}) {
		t.Fatalf("after c2 expired: %v", got)
	}
	var causes [][]string
	for _, en := range e.history(0, 0).Entries {
		if en.Generation > n {
			causes = append(causes, en.Trigger.Causes)
		}
	}
	if !slices.ContainsFunc(causes, func(c []string) bool { return slices.Equal(c, []string{model.CauseExpired}) }) &&
		!slices.ContainsFunc(causes, func(c []string) bool { return slices.Contains(c, model.CauseHandoff) }) {
		t.Fatalf("causes after the expiry: %v", causes)
	}
}

func TestRevokeTimeoutRemovesTheMember(t *testing.T) {
	e := twoMembers(t, coordinator.Binding{RevokeTimeout: "3s"})
	// c1 keeps its session but never confirms generation 2, published 0.8 s ago.
	for range 2 {
		e.confirm("c1", 1)
		e.hb("g", "c2", "T")
		e.advance(900 * time.Millisecond)
	}
	if got := e.told(); len(got["c2"]) != 0 {
		t.Fatalf("handed over before the revoke timeout: %v", got)
	}
	e.advance(500 * time.Millisecond)
	if got := e.told(); !slices.Equal(got["c2"], []int32{2, 3}) && !slices.Equal(got["c2"], []int32{0, 1, 2, 3}) {
		t.Fatalf("after the revoke timeout: %v", got)
	}
	_, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}, Generations: map[string]int64{"T": 1}})
	if coordinator.KindOf(err) != coordinator.KindConflict || !strings.Contains(err.Error(), "revoke timeout") {
		t.Fatalf("c1's heartbeat after its removal: %v", err)
	}
	h := e.history(0, 0).Entries
	if tr := h[0].Trigger; !slices.Contains(tr.Causes, model.CauseHandoff) || tr.Released[0].Reason != model.ReleaseRevokeTimeout {
		t.Fatalf("trigger %+v", tr)
	}
	e.advance(time.Second)
	if tr := e.history(1, 0).Entries[0].Trigger; !slices.Equal(tr.Removed, []string{"c1"}) {
		t.Fatalf("recomputation trigger %+v", tr)
	}
	// After a session timeout the fence ends and c1 may join again, with nothing.
	for range 10 {
		e.hb("g", "c2", "T")
		e.advance(time.Second)
	}
	if a := e.confirm("c1", 1); len(a.Queues["T"]) != 0 {
		t.Fatalf("c1 rejoining is told %v at once", a.Queues["T"])
	}
}

func TestBindingRejectsBadHandoff(t *testing.T) {
	e := newEnv(t)
	for _, b := range []coordinator.Binding{
		{Strategy: "averagely", Handoff: "lazy"},
		{Strategy: "averagely", RevokeTimeout: "soon"},
		{Strategy: "averagely", RevokeTimeout: "-1s"},
		{Strategy: "averagely", RevokeTimeout: "2h"},
	} {
		if _, _, err := e.c.PutGroup("g", b); coordinator.KindOf(err) != coordinator.KindInvalid {
			t.Errorf("%+v: %v", b, err)
		}
	}
	g, _, err := e.c.PutGroup("g", coordinator.Binding{Strategy: "averagely"})
	if err != nil || g.Handoff != coordinator.HandoffCooperative {
		t.Fatalf("default handoff %q, %v", g.Handoff, err)
	}
}

func TestHandoffAndLocksCompose(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.orderly("g", "averagely", coordinator.QueueDelivery, nil)
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	e.confirm("c1", 1)
	if locked, _ := e.lockQueues("c1", 0, 1, 2, 3); len(locked) != 4 {
		t.Fatalf("c1 locked %v", locked)
	}
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	// Not told queue 2 yet: not its owner.
	if _, refused := e.lockQueues("c2", 2); len(refused) != 1 || refused[0].Reason != lock.ReasonNotOwner {
		t.Fatalf("c2 before c1 confirmed: %+v", refused)
	}
	// c1 confirms but still holds the lock: the lock keeps c2 out until c1 unlocks.
	e.confirm("c1", 2)
	e.tick()
	if _, refused := e.lockQueues("c2", 2); len(refused) != 1 || refused[0].Reason != lock.ReasonHeld {
		t.Fatalf("c2 after c1 confirmed, before it unlocked: %+v", refused)
	}
	if _, err := e.c.UnlockQueues("g", "c1", []lock.Queue{q(2), q(3)}); err != nil {
		t.Fatal(err)
	}
	if locked, _ := e.lockQueues("c2", 2, 3); len(locked) != 2 {
		t.Fatalf("c2 after c1 unlocked: %+v", locked)
	}
}

func TestHistoryRetentionAndRestart(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.HistoryLimit = 3 })
	e.topic("T", 8)
	e.handoff = coordinator.HandoffEager
	e.group("g", "averagely")
	for i, cid := range []string{"c1", "c2", "c3", "c4", "c5"} {
		e.hb("g", cid, "T")
		for _, other := range []string{"c1", "c2", "c3", "c4", "c5"}[:i] {
			e.hb("g", other, "T")
		}
		e.advance(time.Second)
	}
	if e.gen("g", "T") != 5 {
		t.Fatalf("generation %d", e.gen("g", "T"))
	}
	e.restart()
	h := e.history(2, 0)
	if len(h.Entries) != 2 || h.Entries[0].Generation != 5 || h.Entries[1].Generation != 4 || h.Next != 4 {
		t.Fatalf("first page %+v", h)
	}
	h = e.history(2, h.Next)
	if len(h.Entries) != 1 || h.Entries[0].Generation != 3 || h.Next != 0 {
		t.Fatalf("second page %+v", h)
	}
	if _, err := e.c.History("nope", "T", 0, 0); coordinator.KindOf(err) != coordinator.KindNotFound {
		t.Fatalf("unknown group: %v", err)
	}
	if _, err := e.c.History("g", "T?", 0, 0); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Fatalf("bad topic: %v", err)
	}
	if _, err := e.c.Explain("g", "T", "broker-a", -1); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Fatalf("bad queue id: %v", err)
	}
	if err := e.c.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	e.group("g", "averagely")
	if h := e.history(0, 0); len(h.Entries) != 0 {
		t.Fatalf("history of a deleted group survived: %+v", h)
	}
}

func TestHistoryAgeRetention(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.HistoryMaxAge = time.Hour })
	e.topic("T", 4)
	e.handoff = coordinator.HandoffEager
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	e.clock.Advance(2 * time.Hour)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if h := e.history(0, 0); len(h.Entries) != 1 || h.Entries[0].Generation != 2 {
		t.Fatalf("history %+v", h)
	}
}

// A member that never confirms (no generations reported, no confirms flag) cannot release a
// queue: it is handed off eagerly rather than held up for a revoke timeout and removed.
func TestMemberThatNeverConfirmsIsHandedOffEagerly(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if got := e.told(); !slices.Equal(got["c2"], []int32{2, 3}) || len(e.status("g").Topics["T"].Handoffs) != 0 {
		t.Fatalf("told %v", got)
	}
	// One that says it confirms is waited for, from its first heartbeat on.
	if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c3", Topics: []string{"T"}, Confirms: true}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	e.hb("g", "c4", "T")
	e.advance(time.Second)
	st := e.status("g")
	if hs := st.Topics["T"].Handoffs; len(hs) != 1 || hs[0].From != "c3" || hs[0].To != "c4" {
		t.Fatalf("handoffs %+v, told %v", hs, e.told())
	}
	for _, m := range st.Members {
		if m.Confirms != (m.CID == "c3") {
			t.Fatalf("member %s confirms: %v", m.CID, m.Confirms)
		}
	}
}

// A member whose session the daemon ended is told so when it comes back; one that left, or
// that comes back after a daemon restart, is not.
func TestHeartbeatSaysASessionWasLost(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	if a := e.hb("g", "c1", "T"); a.Lost {
		t.Fatal("a first heartbeat says lost")
	}
	e.hb("g", "c2", "T")
	for range 11 {
		e.hb("g", "c2", "T")
		e.advance(time.Second)
	}
	if a := e.hb("g", "c1", "T"); !a.Lost {
		t.Fatal("an expired member's return does not say lost")
	}
	if a := e.hb("g", "c1", "T"); a.Lost {
		t.Fatal("the next heartbeat says lost again")
	}
	if _, err := e.c.Leave("g", "c1"); err != nil {
		t.Fatal(err)
	}
	if a := e.hb("g", "c1", "T"); a.Lost {
		t.Fatal("a member that left is told it lost its session")
	}
	e.restart()
	if a := e.hb("g", "c2", "T"); a.Lost {
		t.Fatal("a member is told it lost its session after a daemon restart")
	}
}

// A history entry's moves are every queue whose owner changed, in queue order, also when the
// topic shrinks (queues of the previous generation that the new one does not have) or grows;
// and they read back the same after a restart (from the stored, packed record).
func TestHistoryMovesWhenQueuesChange(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 8)
	e.handoff = coordinator.HandoffEager
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	owners := func() map[int32]string {
		out := map[int32]string{}
		for cid, qs := range e.status("g").Topics["T"].Assignment {
			for _, q := range qs {
				out[q.QueueID] = cid
			}
		}
		return out
	}
	for _, n := range []int{3, 12} {
		before := owners()
		e.topic("T", n)
		e.advance(time.Second)
		after := owners()
		var want []string
		for id := int32(0); id < 12; id++ {
			if before[id] != after[id] {
				want = append(want, fmt.Sprintf("%d:%s>%s", id, before[id], after[id]))
			}
		}
		gen := e.gen("g", "T")
		for round := range 2 {
			var got []string
			for _, m := range e.entry(gen).Moves {
				got = append(got, fmt.Sprintf("%d:%s>%s", m.Queue.QueueID, m.From, m.To))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%d queues, round %d: moves %v, want %v", n, round, got, want)
			}
			e.restart()
			e.hb("g", "c1", "T")
			e.hb("g", "c2", "T")
		}
	}
}

// A static member that restarts (a new client id for its instance id) in the same window as a
// join: the next generation's history moves none of its queues away from its old client id,
// which the generation in force no longer names.
func TestHistoryAfterStaticRestart(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 6)
	e.group("g", "averagely")
	join := func(cid, instance string) {
		if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, InstanceID: instance, Topics: []string{"T"}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, inst := range []string{"pod-0", "pod-1", "pod-2"} {
		join(fmt.Sprintf("10.0.0.%d@1", i), inst)
	}
	e.advance(time.Second)
	join("10.0.0.3@1", "pod-3")
	e.clock.Advance(time.Second) // pod-3's rebalance is due at the next Tick ...
	join("10.0.0.9@7", "pod-1")  // ... which also stores pod-1's new client id
	e.tick()
	if n := e.gen("g", "T"); n != 2 {
		t.Fatalf("generation %d, want 2", n)
	}
	en := e.entry(2)
	if len(en.Moves) == 0 {
		t.Fatal("pod-3's join moved nothing")
	}
	for _, m := range en.Moves {
		if m.From == "10.0.0.1@1" || m.To == "10.0.0.1@1" {
			t.Errorf("move %+v names pod-1's client id from before its restart", m)
		}
	}
}

// TestHistoryTriggerNamesEveryChange: a generation's trigger names, by client id, the members
// that joined (one whose key, its instance id, differs from its client id), changed labels and
// left, and later the one that expired, whatever the order of their keys among the others'.
func TestHistoryTriggerNamesEveryChange(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 8)
	if _, _, err := e.c.PutGroup("g", coordinator.Binding{Strategy: "averagely", Handoff: coordinator.HandoffEager}); err != nil {
		t.Fatal(err)
	}
	hb := func(cid, instance string, labels map[string]string) {
		t.Helper()
		if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, InstanceID: instance, Topics: []string{"T"}, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	// keys: c3 < c5 < i-0 < i-1
	hb("c1", "i-1", nil)
	hb("c3", "", map[string]string{"zone": "a"})
	hb("c5", "", nil)
	e.advance(time.Second)
	first := e.gen("g", "T")

	hb("c1", "i-1", nil)
	hb("c2", "i-0", nil)
	hb("c3", "", map[string]string{"zone": "b"})
	if _, err := e.c.Leave("g", "c5"); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	tr := e.entry(first + 1).Trigger
	if !slices.Equal(tr.Joined, []string{"c2"}) || !slices.Equal(tr.Labels, []string{"c3"}) || !slices.Equal(tr.Left, []string{"c5"}) ||
		len(tr.Expired) != 0 || !slices.Equal(tr.Causes, []string{model.CauseJoined, model.CauseLeft, model.CauseLabels}) {
		t.Fatalf("generation %d's trigger %+v; want c2 joined, c3's labels changed, c5 left", first+1, tr)
	}

	// c3 goes silent until its session ends.
	for range 12 {
		hb("c1", "i-1", nil)
		hb("c2", "i-0", nil)
		e.advance(time.Second)
	}
	var expired *model.Trigger
	for _, en := range e.history(0, 0).Entries {
		if en.Generation > first+1 && slices.Contains(en.Trigger.Causes, model.CauseExpired) {
			expired = &en.Trigger
		}
	}
	if expired == nil || !slices.Equal(expired.Expired, []string{"c3"}) || len(expired.Left)+len(expired.Joined)+len(expired.Labels) != 0 {
		t.Fatalf("no generation says c3 expired alone: %+v", expired)
	}
}
