package main_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
)

// TestClientAgainstServe drives the real binary with the Go client: two consumers get
// averagely's split, one leaves and the other has every queue by long-poll well before its
// next heartbeat could tell it, and a producer's ForKey names the queue the daemon names.
func TestClientAgainstServe(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	ctx := context.Background()
	c := client.New(d.url)
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 8, WriteQueues: 8}}); err != nil {
		t.Fatal(err)
	}
	// A topic for producers on two brokers (write queues never above read queues: those would
	// strand messages, and the daemon refuses them).
	if _, err := c.PutTopic(ctx, "P", []client.Broker{{Name: "broker-a", ReadQueues: 8, WriteQueues: 8}, {Name: "broker-b", ReadQueues: 3, WriteQueues: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely"}); err != nil {
		t.Fatal(err)
	}

	// Heartbeats at a third of the session timeout; changes come by long-poll.
	opts := client.ConsumerOptions{HeartbeatInterval: e2eSession / 3, RetryMin: 20 * time.Millisecond,
		OnError: func(err error) { t.Logf("consumer error: %v", err) }}
	cids := []string{"10.0.0.1@1", "10.0.0.2@1"}
	want := native(averagely.Allocate, 8, cids...)
	var cons []*client.Consumer
	for _, cid := range cids {
		cn := c.NewConsumer("g", cid, []string{"T"}, opts)
		if err := cn.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.Close(ctx) })
		cons = append(cons, cn)
	}
	var gen int64
	for i, cn := range cons {
		a := awaitAssignment(t, cn, func(a client.Assignment) bool { return slices.Equal(ids(a.Queues), want[cids[i]]) })
		if gen != 0 && a.Generation != gen {
			t.Fatalf("%s at generation %d, the other at %d", cids[i], a.Generation, gen)
		}
		gen = a.Generation
	}
	// The group's status shows what the consumers have applied.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.GetGroup(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Members) == 2 && st.Members[0].Generations["T"] == gen && st.Members[1].Generations["T"] == gen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members' applied generations never reached %d: %+v", gen, st.Members)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The second leaves: the first has everything at once.
	start := time.Now()
	if err := cons[1].Close(ctx); err != nil {
		t.Fatal(err)
	}
	a := awaitAssignment(t, cons[0], func(a client.Assignment) bool { return len(a.Queues) == 8 })
	took := time.Since(start)
	if a.Generation != gen+1 || !slices.Equal(ids(a.Queues), []int32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("after the leave: %+v, want generation %d with every queue", a, gen+1)
	}
	if took > e2eSession/2 {
		t.Fatalf("the leave took %v to reach the other consumer", took)
	}
	t.Logf("leave -> the other consumer has every queue: %v (debounce 50ms)", took)
	// The consumers of one client long-poll in shared requests, and that is how the change came.
	if _, m := d.raw("GET", "/metrics", ""); !regexp.MustCompile(`(?m)^allocd_http_batched_polls_total\{code="200"\} [1-9]`).Match(m) {
		t.Errorf("no long-poll was answered in a batch: /metrics has %q", regexp.MustCompile(`(?m)^allocd_http_batched_polls.*$`).FindAll(m, -1))
	}

	// Producers: 11 writable queues (broker-a 0..7, broker-b 0..2); ForKey agrees with the daemon.
	p := c.NewProducer("P", client.ProducerOptions{})
	qs, err := p.Queues(ctx)
	if err != nil || len(qs) != 11 {
		t.Fatalf("route: %v, %v", qs, err)
	}
	hit := map[client.Queue]bool{}
	for i := range 300 {
		key := fmt.Sprintf("user-%d", i*104729)
		if i%3 == 1 {
			key = "订单-" + key + "-🚀"
		}
		mine, err := p.ForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := c.RouteKey(ctx, "P", key)
		if err != nil {
			t.Fatal(err)
		}
		if mine != theirs {
			t.Fatalf("ForKey(%q) = %v; allocd serve says %v", key, mine, theirs)
		}
		hit[mine] = true
	}
	if len(hit) != 11 {
		t.Fatalf("300 keys fell on %d of 11 queues", len(hit))
	}
}

// awaitAssignment reads a consumer's assignments until one satisfies ok.
func awaitAssignment(t *testing.T, c *client.Consumer, ok func(client.Assignment) bool) client.Assignment {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case a, open := <-c.Assignments():
			if !open {
				t.Fatalf("%s's assignments closed", c.CID())
			}
			if ok(a) {
				return a
			}
		case <-timeout:
			cur, _ := c.Current("T")
			t.Fatalf("%s: no matching assignment within 20s; it has %+v", c.CID(), cur)
		}
	}
}
