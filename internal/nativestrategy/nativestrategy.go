// Package nativestrategy answers allocation requests with the built-in strategies' Go code
// (averagely and circle) instead of their wasm plugins, for tests of the packages above the
// host: the coordinator's Allocator, without a wazero runtime.
package nativestrategy

import (
	"context"
	"fmt"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
)

// Allocator serves the plugins "averagely" and "circle" as version "v1"; any other name is an
// error, as a plugin that is not loaded.
type Allocator struct{}

var funcs = map[string]func(dst []int, n, c, self int) []int{"averagely": averagely.Allocate, "circle": circle.Allocate}

// Allocate answers for every consumer of req (whole-group requests, as the coordinator sends).
func (Allocator) Allocate(_ context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	fn := funcs[plugin]
	if fn == nil {
		return nil, "", fmt.Errorf("plugin %q not loaded", plugin)
	}
	resp := &abi.Response{}
	for i := range req.Consumers {
		resp.Results = append(resp.Results, abi.Result{Indices: fn(nil, len(req.Queues), len(req.Consumers), i)})
	}
	return resp, "v1", nil
}
