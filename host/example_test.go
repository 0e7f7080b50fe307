package host_test

import (
	"context"
	"fmt"
	"os"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// Load a plugin and ask it for a whole group's assignment. The plugin here is the README's
// 20-line example (host/testdata/plugins/first): the first consumer takes every queue.
func ExampleRuntime_Load() {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: cacheDir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close(ctx)

	path, err := wasmbuild.Build("host/testdata/plugins/first") // make plugins does this for plugins/
	if err != nil {
		fmt.Println(err)
		return
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := rt.Load(ctx, "first", wasm)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	fmt.Println(p.Info().Name, p.Info().Version)

	req := &abi.Request{
		Group:     "orders",
		Queues:    []abi.Queue{{Topic: "T", BrokerName: "b", QueueID: 1}, {Topic: "T", BrokerName: "b", QueueID: 0}},
		Consumers: []string{"c2", "c1"},
	}
	resp, err := p.Allocate(ctx, req) // sorts req.Queues and req.Consumers as RocketMQ does
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range resp.Results {
		fmt.Print(req.Consumers[i], ":")
		for _, q := range r.Indices {
			fmt.Print(" ", req.Queues[q].QueueID)
		}
		fmt.Println()
	}
	// Output:
	// first 1.0.0
	// c1: 0 1
	// c2:
}
