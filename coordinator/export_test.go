package coordinator

import (
	"context"

	"github.com/allocd/allocd/abi"
)

// AllocateForTest is the coordinator's plugin call (allocate: the call, its check, and the
// answer as key -> queues), for the benchmarks of coordinator_test.
func (c *Coordinator) AllocateForTest(ctx context.Context, plugin string, req *abi.Request) (map[string][]abi.Queue, string, error) {
	return c.allocate(ctx, plugin, req)
}
