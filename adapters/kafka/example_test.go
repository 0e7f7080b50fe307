package kafka_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/allocd/allocd/adapters/kafka"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// A Kafka consumer whose group's plan comes from an allocd plugin: pass the balancer to
// kgo.Balancers. Every member of the group uses the same plugin.
func Example() {
	file, err := wasmbuild.Build("plugins/sticky/wasm") // or build/plugins/sticky.wasm from `make plugins`
	if err != nil {
		log.Fatal(err)
	}
	bal, err := kafka.NewBalancer(context.Background(), kafka.Config{
		PluginFile: file,
		Labels:     map[string]string{"zone": "eu-west-1a"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer bal.Close()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers("127.0.0.1:9092"),
		kgo.ConsumerGroup("orders-consumers"),
		kgo.ConsumeTopics("orders"),
		kgo.Balancers(bal),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	fmt.Println(bal.ProtocolName(), bal.IsCooperative())
	// Output: allocd true
}
