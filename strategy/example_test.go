package strategy_test

import (
	"context"
	"fmt"
	"log"

	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/strategy"
)

// A strategy loaded from a .wasm file answers for a whole group; the file is watched, and a
// new version that passes its checks replaces the running one.
func Example() {
	file, err := wasmbuild.Build("plugins/averagely/wasm") // or any NAME.wasm, e.g. build/plugins/averagely.wasm
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := strategy.Open(ctx, strategy.Config{File: file, CacheDir: cacheDir})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	g := &strategy.Group{Name: "orders-consumers"}
	for id := range int32(5) {
		g.Queues = append(g.Queues, strategy.Queue{Topic: "orders", BrokerName: "broker-a", QueueID: id})
	}
	g.Consumers = []strategy.Consumer{{ID: "10.0.0.1@1"}, {ID: "10.0.0.2@1", Labels: map[string]string{"zone": "b"}}}
	a, err := s.Assign(ctx, g)
	if err != nil {
		log.Fatal(err) // the plugin failed: keep the previous assignment
	}
	for i, c := range g.Consumers {
		fmt.Print(c.ID, ":")
		for _, q := range a.Owned[i] {
			fmt.Print(" ", g.Queues[q].QueueID)
		}
		fmt.Println()
	}
	// Output:
	// 10.0.0.1@1: 0 1 2
	// 10.0.0.2@1: 3 4
}
