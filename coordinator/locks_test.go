package coordinator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/lock"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/route"
)

func (e *env) orderly(name, strategy string, delivery coordinator.Delivery, config map[string]string) {
	e.t.Helper()
	if _, _, err := e.c.PutGroup(name, coordinator.Binding{Strategy: strategy, Delivery: delivery, Orderly: true, Config: config, Handoff: e.handoff}); err != nil {
		e.t.Fatal(err)
	}
}

func q(id int) lock.Queue { return lock.Queue{Topic: "T", BrokerName: "broker-a", QueueID: id} }

func (e *env) lockQueues(cid string, ids ...int) ([]lock.Grant, []lock.Refusal) {
	e.t.Helper()
	var qs []lock.Queue
	for _, id := range ids {
		qs = append(qs, q(id))
	}
	locked, refused, err := e.c.LockQueues("g", cid, qs, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return locked, refused
}

func (e *env) lockGroup(cid, name string) (lock.Grant, *lock.Refusal) {
	e.t.Helper()
	g, r, err := e.c.LockMessageGroup("g", cid, lock.MessageGroup{Topic: "T", Name: name}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return g, r
}

func (e *env) valid(l lock.Lock, token uint64) bool {
	e.t.Helper()
	res, err := e.c.CheckLock("g", l, token)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Valid
}

func TestQueueLocksFollowGenerations(t *testing.T) {
	e := newEnv(t)
	e.handoff = coordinator.HandoffEager // the lock alone keeps c2 out: see handoff_test.go for both
	e.topic("T", 4)
	e.orderly("g", "averagely", coordinator.QueueDelivery, nil)
	e.hb("g", "c1", "T")
	e.advance(time.Second)
	locked, refused := e.lockQueues("c1", 0, 1, 2, 3)
	if len(locked) != 4 || len(refused) != 0 {
		t.Fatalf("c1 owning every queue: locked %v, refused %v", locked, refused)
	}
	old := locked[2].Token

	// c2 joins: the new generation gives it queues 2 and 3, but c1 still holds them.
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	e.hb("g", "c1", "T")
	if _, refused := e.lockQueues("c2", 2, 3); len(refused) != 2 || refused[0].Reason != lock.ReasonHeld || refused[0].Holder != "c1" {
		t.Fatalf("c2 before c1 unlocked: refused %+v", refused)
	}
	// c1's renewal of a queue moved away is refused; its own queues renew with the same token.
	locked, refused = e.lockQueues("c1", 0, 2)
	if len(locked) != 1 || !locked[0].Renewed || len(refused) != 1 || refused[0].Reason != lock.ReasonNotOwner || refused[0].Owner != "c2" {
		t.Fatalf("c1 renewing 0 and 2: locked %+v, refused %+v", locked, refused)
	}
	unlocked, err := e.c.UnlockQueues("g", "c1", []lock.Queue{q(2), q(3)})
	if err != nil || len(unlocked) != 2 {
		t.Fatalf("c1 unlocking: %v %v", unlocked, err)
	}
	locked, _ = e.lockQueues("c2", 2, 3)
	if len(locked) != 2 || locked[0].Token <= 4 {
		t.Fatalf("c2 after c1 unlocked: %+v", locked)
	}
	if e.valid(lock.QueueLock(q(2)), old) || !e.valid(lock.QueueLock(q(2)), locked[0].Token) {
		t.Fatal("the old token still checks, or the new one does not")
	}
	res, _ := e.c.CheckLock("g", lock.QueueLock(q(2)), old)
	if res.Holder != "c2" {
		t.Fatalf("check of the old token names holder %q, want c2", res.Holder)
	}
}

func TestLocksReleasedWhenMembersGo(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.orderly("g", "", coordinator.MessageDelivery, map[string]string{coordinator.MaxAttemptsKey: "1"})
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.hb("g", cid, "T")
	}
	g1, _ := e.lockGroup("c1", "order-1")
	if _, r := e.lockGroup("c2", "order-1"); r == nil || r.Holder != "c1" {
		t.Fatalf("c2 was not refused a group c1 holds: %+v", r)
	}
	// c1 leaves: its group is free at once, and the departed holder counts a failed attempt.
	if _, err := e.c.Leave("g", "c1"); err != nil {
		t.Fatal(err)
	}
	g2, r := e.lockGroup("c2", "order-1")
	if r != nil || g2.Token <= g1.Token || g2.Attempt != 2 || !g2.DeadLetter {
		t.Fatalf("c2 after c1 left: %+v %+v", g2, r)
	}
	if e.valid(lock.MessageGroupLock(lock.MessageGroup{Topic: "T", Name: "order-1"}), g1.Token) {
		t.Fatal("the departed member's token still checks")
	}
	// c2 falls silent: the session timeout drops it and releases its group.
	for range 12 {
		e.hb("g", "c3", "T")
		e.advance(time.Second)
	}
	g3, r := e.lockGroup("c3", "order-1")
	if r != nil || g3.Token <= g2.Token {
		t.Fatalf("c3 after c2 expired: %+v %+v", g3, r)
	}
	if err := e.c.ReleaseMessageGroup("g", "c3", lock.MessageGroup{Topic: "T", Name: "order-1"}, g2.Token, lock.Done); coordinator.KindOf(err) != coordinator.KindConflict {
		t.Fatalf("release with c2's old token: %v, want a conflict", err)
	}
	if err := e.c.ReleaseMessageGroup("g", "c3", lock.MessageGroup{Topic: "T", Name: "order-1"}, g3.Token, lock.Done); err != nil {
		t.Fatal(err)
	}
}

func TestLockErrors(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("plain", "averagely")
	e.orderly("g", "averagely", coordinator.QueueDelivery, nil)
	e.hb("g", "c1", "T")
	for _, c := range []struct {
		name string
		err  error
		kind coordinator.Kind
	}{
		{"unknown group", third(e.c.LockMessageGroup("nope", "c1", lock.MessageGroup{Topic: "T", Name: "x"}, 0)), coordinator.KindNotFound},
		{"not orderly", third(e.c.LockQueues("plain", "c1", []lock.Queue{q(0)}, 0)), coordinator.KindConflict},
		{"other kind", third(e.c.LockMessageGroup("g", "c1", lock.MessageGroup{Topic: "T", Name: "x"}, 0)), coordinator.KindConflict},
		{"not a member", third(e.c.LockQueues("g", "c9", []lock.Queue{q(0)}, 0)), coordinator.KindNotFound},
		{"short lease", third(e.c.LockQueues("g", "c1", []lock.Queue{q(0)}, time.Second)), coordinator.KindInvalid},
	} {
		if k := coordinator.KindOf(c.err); k != c.kind {
			t.Errorf("%s: %v (%q), want %q", c.name, c.err, k, c.kind)
		}
	}
	if _, _, err := e.c.PutGroup("b", coordinator.Binding{Model: coordinator.Broadcasting, Orderly: true}); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Errorf("an orderly broadcasting group: %v", err)
	}
	if _, _, err := e.c.PutGroup("m", coordinator.Binding{Delivery: coordinator.MessageDelivery, Orderly: true, Config: map[string]string{"maxAttempts": "0"}}); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Errorf("maxAttempts 0: %v", err)
	}
}

func third[A, B, C any](_ A, _ B, c C) C { return c }

func TestLocksSurviveARestart(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 2)
	e.orderly("g", "averagely", coordinator.QueueDelivery, nil)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	l1, _ := e.lockQueues("c1", 0)
	l2, _ := e.lockQueues("c2", 1)
	if len(l1) != 1 || len(l2) != 1 {
		t.Fatalf("locks before the restart: %v %v", l1, l2)
	}

	e.restart()
	// The leases are back, and c1's token still checks; tokens continue above the old ones.
	if !e.valid(lock.QueueLock(q(0)), l1[0].Token) {
		t.Fatal("c1's lease was lost in the restart")
	}
	e.hb("g", "c1", "T")
	locked, _ := e.lockQueues("c1", 0)
	if len(locked) != 1 || !locked[0].Renewed || locked[0].Token != l1[0].Token {
		t.Fatalf("c1 renewing after the restart: %+v", locked)
	}
	// c2 does not come back: a session timeout after the restart its lease is released, so
	// c1, which the next generation gives queue 1, can take it with a larger token.
	for range 12 {
		e.hb("g", "c1", "T")
		e.advance(time.Second)
		if err := e.c.TickLocks(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if e.valid(lock.QueueLock(q(1)), l2[0].Token) {
		t.Fatal("the lease of a member that never came back still checks")
	}
	locked, _ = e.lockQueues("c1", 1)
	if len(locked) != 1 || locked[0].Token <= l2[0].Token {
		t.Fatalf("c1 taking queue 1: %+v", locked)
	}
}

// A failover or restart under load can keep every member from reaching the new coordinator for
// longer than a session timeout: the leases it restored are honoured until some member of the
// group has reached it and the holder has stayed away a session timeout after that.
func TestRestoredLeasesWaitForTheGroupToComeBack(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 2)
	e.orderly("g", "averagely", coordinator.QueueDelivery, nil)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	l2, _ := e.lockQueues("c2", 1)
	if len(l2) != 1 {
		t.Fatalf("c2's lock before the restart: %v", l2)
	}
	e.restart()
	tick := func() {
		e.advance(time.Second)
		if err := e.c.TickLocks(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Two session timeouts pass with no heartbeat at all: nobody could reach the daemon.
	for range 2 * int(session/time.Second) {
		tick()
	}
	if !e.valid(lock.QueueLock(q(1)), l2[0].Token) {
		t.Fatal("a restored lease was released before any member of its group came back")
	}
	// c1 comes back; c2 does not: a session timeout later its lease is released.
	for range int(session/time.Second) - 1 {
		e.hb("g", "c1", "T")
		tick()
		if !e.valid(lock.QueueLock(q(1)), l2[0].Token) {
			t.Fatal("c2's lease was released less than a session timeout after c1 came back")
		}
	}
	e.hb("g", "c1", "T")
	tick()
	e.hb("g", "c1", "T")
	tick()
	if e.valid(lock.QueueLock(q(1)), l2[0].Token) {
		t.Fatal("the lease of a member that did not come back while others did still checks")
	}
}

func TestMessageGroupPreference(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.orderly("g", "averagely", coordinator.MessageDelivery, nil)
	cids := []string{"c1", "c2", "c3"}
	for _, cid := range cids {
		e.hb("g", cid, "T")
	}
	e.advance(time.Second)
	const name = "order-42"
	mg := lock.MessageGroup{Topic: "T", Name: name}
	calls := e.alloc.Calls("averagely")

	// Contention: c1 holds, the two others wait.
	g, _ := e.lockGroup("c1", name)
	e.lockGroup("c2", name)
	e.lockGroup("c3", name)
	if err := e.c.ReleaseMessageGroup("g", "c1", mg, g.Token, lock.Done); err != nil {
		t.Fatal(err)
	}
	// The first contended grant asks for the preference, which is not known yet: no preference.
	first, r := e.lockGroup("c2", name)
	if r != nil {
		t.Fatalf("c2 refused with no preference known: %+v", r)
	}
	if err := e.c.TickLocks(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.alloc.Calls("averagely") != calls+1 {
		t.Fatalf("the preference took %d plugin calls, want 1", e.alloc.Calls("averagely")-calls)
	}
	req := e.alloc.last
	if len(req.Queues) != coordinator.PreferenceBuckets || req.Queues[5] != (abi.Queue{Topic: "T", QueueID: 5}) || !slices.Equal(req.Consumers, cids) {
		t.Fatalf("preference request: %d queues, consumers %v", len(req.Queues), req.Consumers)
	}
	preferred := ""
	for i, cid := range cids {
		for _, x := range averagely.Allocate(nil, coordinator.PreferenceBuckets, len(cids), i) {
			if x == preferenceBucket(name) {
				preferred = cid
			}
		}
	}
	others := slices.DeleteFunc(slices.Clone(cids), func(c string) bool { return c == preferred })

	// Next round: c2 holds; everyone else waits; it releases. A non-preferred member that asks
	// first is refused while the preferred member's ask is fresh; the preferred one gets it.
	for _, cid := range cids {
		e.lockGroup(cid, name)
	}
	if err := e.c.ReleaseMessageGroup("g", "c2", mg, first.Token, lock.Done); err != nil {
		t.Fatal(err)
	}
	if preferred != "c2" {
		other := others[0]
		if other == "c2" {
			other = others[1]
		}
		if _, r := e.lockGroup(other, name); r == nil || r.Reason != lock.ReasonReserved || r.Owner != preferred {
			t.Fatalf("%s asking while %s (preferred) waits: %+v", other, preferred, r)
		}
	}
	if _, r := e.lockGroup(preferred, name); r != nil {
		t.Fatalf("the preferred member %s was refused: %+v", preferred, r)
	}
	// Same generation: no further plugin call.
	if e.alloc.Calls("averagely") != calls+1 {
		t.Fatal("the preference was computed again within one generation")
	}
}

func preferenceBucket(name string) int {
	qs := make([]abi.Queue, coordinator.PreferenceBuckets)
	for i := range qs {
		qs[i].QueueID = int32(i)
	}
	q, _ := route.ShardQueue(qs, name)
	return int(q.QueueID)
}
