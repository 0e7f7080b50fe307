package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

// exampleDaemon runs the daemon's coordinator and API in process, with the built-in
// strategies in Go, and returns its URL and a function that stops it. A real program points the
// client at `allocd serve` instead.
func exampleDaemon() (string, func()) {
	dir, _ := os.MkdirTemp("", "allocd-client-example-")
	st, err := store.Open(dir, store.Options{NoSync: true})
	if err != nil {
		panic(err)
	}
	coord, err := coordinator.New(coordinator.Options{Store: st, Allocator: nativestrategy.Allocator{}, Debounce: 5 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { coord.Run(ctx); close(done) }()
	srv, _ := server.New(server.Options{Coordinator: coord})
	ts := httptest.NewServer(srv.Handler())
	return ts.URL, func() {
		srv.Drain()
		coord.Close()
		ts.Close()
		cancel()
		<-done
		st.Close()
		os.RemoveAll(dir)
	}
}

// A consumer joins a group, receives its queues, and leaves. A second member joining moves
// half of the queues to it; the first hears of it by long-poll within milliseconds.
func Example_consumer() {
	url, stop := exampleDaemon()
	defer stop()
	ctx := context.Background()
	c := client.New(url)
	c.PutTopic(ctx, "TopicTest", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}})
	c.PutGroup(ctx, "orders", client.Binding{Strategy: "averagely"})

	cons := c.NewConsumer("orders", "10.0.0.1@100", []string{"TopicTest"}, client.ConsumerOptions{})
	if err := cons.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer cons.Close(ctx) // leaves the group
	a := <-cons.Assignments()
	fmt.Println(a.Topic, "generation", a.Generation, "queues", len(a.Queues))

	other := c.NewConsumer("orders", "10.0.0.2@100", []string{"TopicTest"}, client.ConsumerOptions{})
	other.Start(ctx)
	defer other.Close(ctx)
	a = <-cons.Assignments()
	fmt.Println(a.Topic, "generation", a.Generation, "queues", len(a.Queues))
	for _, q := range a.Queues {
		fmt.Println(q)
	}
	// Output:
	// TopicTest generation 1 queues 4
	// TopicTest generation 2 queues 2
	// MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]
	// MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=1]
}

// A producer picks queues from its cached route: round-robin for plain messages, and by
// sharding key for messages that must stay in order, exactly where the daemon says the key goes.
func Example_producer() {
	url, stop := exampleDaemon()
	defer stop()
	ctx := context.Background()
	c := client.New(url)
	c.PutTopic(ctx, "TopicTest", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}, {Name: "broker-b", ReadQueues: 4, WriteQueues: 4}})

	p := c.NewProducer("TopicTest", client.ProducerOptions{})
	seen := map[client.Queue]bool{}
	for range 8 {
		q, err := p.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		seen[q] = true
	}
	fmt.Println("round-robin over", len(seen), "queues")

	q, _ := p.ForKey(ctx, "order-42")
	fmt.Println("order-42 ->", q)
	fromDaemon, _ := c.RouteKey(ctx, "TopicTest", "order-42")
	fmt.Println("the daemon agrees:", q == fromDaemon)
	// Output:
	// round-robin over 8 queues
	// order-42 -> MessageQueue [topic=TopicTest, brokerName=broker-b, queueId=1]
	// the daemon agrees: true
}
