package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/store"
)

// averagelyAllocator answers every plugin name with RocketMQ's AVG, natively.
type averagelyAllocator struct{}

func (averagelyAllocator) Allocate(_ context.Context, _ string, req *abi.Request) (*abi.Response, string, error) {
	resp := &abi.Response{}
	for i := range req.Consumers {
		resp.Results = append(resp.Results, abi.Result{Indices: averagely.Allocate(nil, len(req.Queues), len(req.Consumers), i)})
	}
	return resp, "native", nil
}

// Two consumers join a group bound to averagely; once the debounce window has passed, Tick
// publishes generation 1 and each heartbeat answers with the member's queues.
func Example() {
	dir, _ := os.MkdirTemp("", "allocd-example-")
	defer os.RemoveAll(dir)
	st, _ := store.Open(dir, store.Options{})
	defer st.Close()
	clock := &fakeClock{t: time.Unix(0, 0)}
	c, _ := coordinator.New(coordinator.Options{Store: st, Allocator: averagelyAllocator{}, Clock: clock})

	c.PutTopic("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}})
	c.PutGroup("g", coordinator.Binding{Strategy: "averagely"})
	c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}})
	c.Heartbeat("g", coordinator.Heartbeat{CID: "c2", Topics: []string{"T"}})

	clock.Advance(coordinator.DefaultDebounce)
	c.Tick(context.Background())

	for _, cid := range []string{"c1", "c2"} {
		a, _ := c.Heartbeat("g", coordinator.Heartbeat{CID: cid, Topics: []string{"T"}})
		fmt.Println(cid, "generation", a.Generations["T"], "queues", ids(a.Queues["T"]))
	}
	// Output:
	// c1 generation 1 queues [0 1]
	// c2 generation 1 queues [2 3]
}
