package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
)

func TestProducerRoundRobinAndKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Queues in the daemon's order: broker-a 0..2, then broker-b 0..1 (its read queues do not
	// matter to producers).
	if _, err := e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-b", ReadQueues: 8, WriteQueues: 2}, {Name: "broker-a", ReadQueues: 3, WriteQueues: 3}}); err != nil {
		t.Fatal(err)
	}
	p := e.c.NewProducer("T", client.ProducerOptions{})
	route, err := p.Queues(ctx)
	if err != nil || len(route) != 5 {
		t.Fatalf("Queues: %v, %v", route, err)
	}
	first, _ := p.Next(ctx)
	start := -1
	for i, q := range route {
		if q == first {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("Next gave %v, not in the route", first)
	}
	for i := 1; i < 12; i++ {
		q, err := p.Next(ctx)
		if want := route[(start+i)%5]; err != nil || q != want {
			t.Fatalf("Next #%d = %v, %v; want %v", i, q, err, want)
		}
	}
	// ForKey picks what the daemon picks, for keys of every kind (Java's hashCode is over UTF-16,
	// and can be negative).
	for i := range 200 {
		key := fmt.Sprintf("order-%d", i*7919)
		switch i % 4 {
		case 1:
			key = "polygenelubricants" + key
		case 2:
			key = "😀 ключ " + key
		case 3:
			key = ""
		}
		got, err := p.ForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.c.RouteKey(ctx, "T", key)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("ForKey(%q) = %v; the daemon says %v", key, got, want)
		}
	}
	if n := e.count("GET", "/v1/topics/T/route"); n != 1+200 {
		t.Fatalf("%d route requests; want 1 for the producer (cached) and 200 for RouteKey", n)
	}
}

func TestProducerCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setup(4)
	clock := newFakeClock()
	p := e.c.NewProducer("T", client.ProducerOptions{RefreshInterval: 30 * time.Second, RetryMin: time.Second, Clock: clock})
	fetches := func() int { return e.count("GET", "/v1/topics/T/route") }
	queues := func() int {
		t.Helper()
		qs, err := p.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(qs)
	}
	if queues() != 4 || fetches() != 1 {
		t.Fatalf("first use: %d fetches", fetches())
	}
	e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 6, WriteQueues: 6}})
	clock.Advance(29 * time.Second)
	if queues() != 4 || fetches() != 1 {
		t.Fatal("the route was fetched again before RefreshInterval")
	}
	clock.Advance(time.Second)
	if queues() != 6 || fetches() != 2 {
		t.Fatalf("after RefreshInterval: %d fetches", fetches())
	}

	// The daemon goes down: the route in hand keeps serving, and the fetch is retried after
	// RetryMin, then twice that.
	e.down.Store(true)
	clock.Advance(30 * time.Second)
	if queues() != 6 || fetches() != 3 {
		t.Fatalf("down: %d fetches", fetches())
	}
	if queues() != 6 || fetches() != 3 {
		t.Fatal("retried before RetryMin")
	}
	clock.Advance(time.Second)
	if queues() != 6 || fetches() != 4 {
		t.Fatal("no retry after RetryMin")
	}
	clock.Advance(time.Second)
	if queues() != 6 || fetches() != 4 {
		t.Fatal("the second retry came before twice RetryMin")
	}
	clock.Advance(time.Second)
	if queues() != 6 || fetches() != 5 {
		t.Fatal("no second retry after twice RetryMin")
	}
	e.down.Store(false)
	// A send failed: Invalidate makes the next call fetch, backoff or not.
	e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 2, WriteQueues: 2}})
	p.Invalidate()
	if queues() != 2 || fetches() != 6 {
		t.Fatalf("after Invalidate: %d fetches", fetches())
	}
	if err := p.Refresh(ctx); err != nil || fetches() != 7 {
		t.Fatalf("Refresh: %v, %d fetches", err, fetches())
	}

	// A topic with no writable queues, then none at all.
	e.c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 2, WriteQueues: 0}})
	p.Invalidate()
	if _, err := p.Next(ctx); !errors.Is(err, client.ErrNoQueues) {
		t.Fatalf("Next without writable queues: %v", err)
	}
	if _, err := p.ForKey(ctx, "k"); !errors.Is(err, client.ErrNoQueues) {
		t.Fatalf("ForKey without writable queues: %v", err)
	}
	e.c.DeleteTopic(ctx, "T")
	p.Invalidate()
	if _, err := p.Next(ctx); !client.IsNotFound(err) {
		t.Fatalf("Next on a deleted topic: %v", err)
	}
	if _, err := p.Next(ctx); !client.IsNotFound(err) {
		t.Fatalf("Next on a deleted topic, within the backoff: %v", err)
	}
}
