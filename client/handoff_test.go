package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

// The revoked callback runs before the consumer confirms the generation that took the queues
// away; only then, and without waiting for a periodic heartbeat, does their new owner get them.
func TestConsumerRevokedCallbackBeforeTheHandoff(t *testing.T) {
	e := newEnv(t)
	e.setup(4)
	ctx := context.Background()
	type call struct {
		gen        int64
		queues     []int32
		newOwnerHs []int32 // what the daemon tells c2 while the callback runs
	}
	calls := make(chan call, 10)
	c1 := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{
		HeartbeatInterval: never,
		OnRevoked: func(topic string, gen int64, qs []client.Queue) {
			st, err := e.c.GetGroup(ctx, "g")
			if err != nil {
				t.Error(err)
			}
			calls <- call{gen, ids(qs), ids(st.Topics["T"].Assignment["c2"])}
		},
	})
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c1.Close(ctx)
	until(t, c1.Assignments(), hasIDs(0, 1, 2, 3))
	go func() {
		for range c1.Assignments() { // a reader keeps reading
		}
	}()
	c2 := e.c.NewConsumer("g", "c2", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never})
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	got := until(t, c2.Assignments(), hasIDs(2, 3))
	cl := <-calls
	if !slices.Equal(cl.queues, []int32{2, 3}) || len(cl.newOwnerHs) != 0 || cl.gen >= got.Generation {
		t.Fatalf("revoked callback %+v; c2 got 2, 3 at generation %d", cl, got.Generation)
	}
	st, err := e.c.GetGroup(ctx, "g")
	if err != nil || len(st.Topics["T"].Handoffs) != 0 {
		t.Fatalf("handoffs left: %+v %v", st.Topics["T"].Handoffs, err)
	}
	h, err := e.c.History(ctx, "g", "T", 1, 0)
	if err != nil || len(h.Entries) != 1 || h.Entries[0].Trigger.Released[0].Member != "c1" {
		t.Fatalf("history %+v %v", h, err)
	}
	ex, err := e.c.Explain(ctx, "g", client.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 2})
	if err != nil || ex.Owner != "c2" || len(ex.Changes) != 3 {
		t.Fatalf("explain %+v %v", ex, err)
	}
}

// A consumer whose revoked callback does not return within the group's revoke timeout is
// removed by the daemon; its next heartbeat is refused, and it lets every queue go.
func TestConsumerRemovedAtTheRevokeTimeoutDropsEverything(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely", RevokeTimeout: "200ms"}); err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	defer release() // so that Close does not wait on a callback still blocked
	revoked := make(chan []int32, 10)
	c1 := e.c.NewConsumer("g", "c1", []string{"T"}, client.ConsumerOptions{
		HeartbeatInterval: never,
		OnRevoked: func(topic string, gen int64, qs []client.Queue) {
			revoked <- ids(qs)
			<-unblock // stuck on its work in flight, the first time
		},
	})
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c1.Close(ctx)
	for cur, _ := c1.Current("T"); len(cur.Queues) != 4; cur, _ = c1.Current("T") {
		time.Sleep(5 * time.Millisecond) // polling c1's state, not waiting for a timer
	}
	c2 := e.c.NewConsumer("g", "c2", []string{"T"}, client.ConsumerOptions{HeartbeatInterval: never})
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c2.Close(ctx)
	if got := <-revoked; !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("first revocation %v", got)
	}
	// c1 is removed at the timeout: c2 gets everything while c1 is still stuck.
	until(t, c2.Assignments(), hasIDs(0, 1, 2, 3))
	release()
	if got := <-revoked; !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("after its removal c1 revoked %v, want the rest of its queues", got)
	}
	if cur, _ := c1.Current("T"); len(cur.Queues) != 0 {
		t.Fatalf("c1 still has %v", cur.Queues)
	}
}
