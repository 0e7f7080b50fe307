package client_test

import (
	"context"
	"slices"
	"testing"

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
