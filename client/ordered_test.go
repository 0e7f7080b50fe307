package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// orderly declares topic T (4 queues on broker-a) and group g with b, orderly.
func (e *env) orderly(b client.Binding) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}}); err != nil {
		e.t.Fatal(err)
	}
	b.Orderly = true
	if _, err := e.c.PutGroup(ctx, "g", b); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) member(cid string) *client.Consumer {
	e.t.Helper()
	cons := e.c.NewConsumer("g", cid, []string{"T"}, client.ConsumerOptions{HeartbeatInterval: time.Second})
	if err := cons.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cons.Close(context.Background()) })
	return cons
}

// eventually polls cond until it holds (at most 10s): for state that changes over the network;
// a cond that needs the helpers' timers drives them with round.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// round drives one pass of a loop timed by clock (the only one on it): it waits until the loop
// waits on its timer, fires that timer, and waits until the loop waits again, its pass done.
func round(t *testing.T, clock *fakeClock) {
	t.Helper()
	clock.WaitTimers(t, 1)
	clock.AdvanceToNext()
	clock.WaitTimers(t, 1)
}

func heldIDs(o *client.Ordered) []int32 {
	var out []int32
	for _, l := range o.Held() {
		out = append(out, l.Queue.QueueID)
	}
	return out
}

func TestOrderedQueueLocksFollowTheAssignment(t *testing.T) {
	e := newEnv(t)
	e.orderly(client.Binding{Strategy: "averagely"})
	ctx := context.Background()
	// Each helper's loop runs on its own fake clock: a round of one is one pass of its loop.
	clock1, clock2 := newFakeClock(), newFakeClock()
	c1 := e.member("c1")
	o1 := e.c.NewOrdered(c1, client.OrderedOptions{Lease: 10 * time.Second, RenewEvery: 100 * time.Millisecond, Clock: clock1})
	o1.Start()
	t.Cleanup(func() { o1.Close(ctx) })
	eventually(t, "c1 holds every queue", func() bool {
		round(t, clock1)
		return slices.Equal(heldIDs(o1), []int32{0, 1, 2, 3})
	})
	before := o1.Held()

	// c1 works on queue 2 while c2 joins and the rebalance moves queues 2 and 3 to c2: c1 keeps
	// queue 2 until its work is done, and c2 gets it only then.
	q2 := before[2].Queue
	inside, release := make(chan uint64), make(chan struct{})
	worked := make(chan error, 1)
	go func() {
		worked <- o1.WithQueue(ctx, q2, func(ctx context.Context, token uint64) error {
			inside <- token
			<-release
			return ctx.Err()
		})
	}()
	if token := <-inside; token != before[2].Token {
		t.Fatalf("WithQueue ran with token %d, the loop holds %d", token, before[2].Token)
	}
	c2 := e.member("c2")
	o2 := e.c.NewOrdered(c2, client.OrderedOptions{Lease: 10 * time.Second, RenewEvery: 100 * time.Millisecond, Clock: clock2})
	o2.Start()
	t.Cleanup(func() { o2.Close(ctx) })
	// The rebalance reaches both consumers over the network; then a pass of c1's loop unlocks
	// queue 3 (not 2, in use), and c2's loop takes it.
	eventually(t, "the rebalance reaches c1 and c2", func() bool {
		a1, _ := c1.Current("T")
		a2, _ := c2.Current("T")
		return slices.Equal(ids(a1.Queues), []int32{0, 1}) && slices.Equal(ids(a2.Queues), []int32{2, 3})
	})
	round(t, clock1)
	eventually(t, "c2 holds queue 3", func() bool {
		round(t, clock2)
		return slices.Contains(heldIDs(o2), 3)
	})
	// Several renewal rounds of both loops (each pass is at least RenewEvery apart).
	for range 5 {
		round(t, clock1)
		round(t, clock2)
		if slices.Contains(heldIDs(o2), 2) {
			t.Fatal("c2 took queue 2 while c1 was still working on it")
		}
	}
	close(release)
	if err := <-worked; err != nil {
		t.Fatalf("c1's work: %v", err)
	}
	eventually(t, "c2 holds queues 2 and 3", func() bool {
		round(t, clock1)
		round(t, clock2)
		return slices.Equal(heldIDs(o2), []int32{2, 3})
	})
	eventually(t, "c1 holds queues 0 and 1", func() bool {
		round(t, clock1)
		return slices.Equal(heldIDs(o1), []int32{0, 1})
	})
	after := o2.Held()
	if after[0].Token <= before[3].Token {
		t.Fatalf("c2's token %d is not above c1's %d", after[0].Token, before[3].Token)
	}
	if res, err := e.c.CheckQueueLock(ctx, "g", q2, before[2].Token); err != nil || res.Valid || res.Holder != "c2" {
		t.Fatalf("check of c1's old token: %+v %v", res, err)
	}
	if err := o1.WithQueue(ctx, q2, func(context.Context, uint64) error { return nil }); !errors.Is(err, client.ErrNotAssigned) {
		t.Fatalf("WithQueue of a queue moved away: %v", err)
	}

	// Close unlocks at once.
	if err := o2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if res, _ := e.c.CheckQueueLock(ctx, "g", q2, after[0].Token); res.Valid {
		t.Fatal("a closed helper's lock still checks")
	}
}

func TestOrderedMessageGroups(t *testing.T) {
	e := newEnv(t)
	e.orderly(client.Binding{Delivery: client.MessageDelivery})
	ctx := context.Background()
	clock := newFakeClock() // times the renewals of the one lock held at a time
	opts := client.OrderedOptions{Lease: 10 * time.Second, RenewEvery: 50 * time.Millisecond, Clock: clock}
	c1 := e.member("c1")
	o1, o2 := e.c.NewOrdered(c1, opts), e.c.NewOrdered(e.member("c2"), opts)

	// A failed attempt is released as a retry: the next grant is attempt 2.
	var first client.MessageGroupLock
	fail := errors.New("boom")
	if err := o1.Do(ctx, "T", "order-1", func(_ context.Context, l client.MessageGroupLock) error { first = l; return fail }); !errors.Is(err, fail) {
		t.Fatalf("Do returned %v, want fn's error", err)
	}
	err := o2.Do(ctx, "T", "order-1", func(ctx context.Context, l client.MessageGroupLock) error {
		if l.Attempt != 2 || l.Token <= first.Token {
			t.Errorf("after a retry: %+v", l)
		}
		// Held by c2: c1's TryDo does not wait, and the renewals keep the lease going.
		ran, err := o1.TryDo(ctx, "T", "order-1", func(context.Context, client.MessageGroupLock) error { return nil })
		if ran || err != nil {
			t.Errorf("TryDo of a held group: ran %v, %v", ran, err)
		}
		for range 4 {
			round(t, clock) // a renewal
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := e.c.CheckMessageGroupLock(ctx, "g", "T", "order-1", first.Token); res.Valid {
		t.Fatal("a released token still checks")
	}

	// c1 is dropped while it works: the renewal fails, the work is canceled with ErrLockLost.
	err = o1.Do(ctx, "T", "order-2", func(ctx context.Context, l client.MessageGroupLock) error {
		if _, err := e.coord.Leave("g", "c1"); err != nil {
			return err
		}
		clock.WaitTimers(t, 1)
		clock.AdvanceToNext() // the next renewal finds the lock gone
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Do after the member was dropped: %v", err)
	}
	// Meanwhile c2 got it at once.
	ran, err := o2.TryDo(ctx, "T", "order-2", func(context.Context, client.MessageGroupLock) error { return nil })
	if !ran || err != nil {
		t.Fatalf("c2 after c1 was dropped: ran %v, %v", ran, err)
	}
}
