package rocketmq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/allocd/allocd/adapters/rocketmq"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// A RocketMQ push consumer whose queues come from an allocd plugin: pass s.Allocate to
// consumer.WithStrategy.
func Example() {
	file, err := wasmbuild.Build("plugins/hash/wasm") // or build/plugins/hash.wasm from `make plugins`
	if err != nil {
		log.Fatal(err)
	}
	s, err := rocketmq.NewStrategy(context.Background(), rocketmq.Config{
		PluginFile: file,
		Config:     map[string]string{"vnodes": "10"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName("orders-consumers"),
		consumer.WithNameServer(primitive.NamesrvAddr{"127.0.0.1:9876"}),
		consumer.WithStrategy(s.Allocate),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = c // c.Subscribe(...), c.Start()

	// What the client asks at each rebalance:
	var mqAll []*primitive.MessageQueue
	for id := range 4 {
		mqAll = append(mqAll, &primitive.MessageQueue{Topic: "orders", BrokerName: "broker-a", QueueId: id})
	}
	cidAll := []string{"10.0.0.1@100", "10.0.0.2@100"}
	for _, cid := range cidAll {
		fmt.Print(cid, ":")
		for _, q := range s.Allocate("orders-consumers", cid, mqAll, cidAll) {
			fmt.Print(" ", q.QueueId)
		}
		fmt.Println()
	}
	// Output:
	// 10.0.0.1@100: 1 2 3
	// 10.0.0.2@100: 0
}
