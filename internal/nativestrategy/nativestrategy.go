// Package nativestrategy answers allocation requests with the built-in strategies' Go code
// (averagely, circle and hash) instead of their wasm plugins: for tests of the packages above the
// host (the coordinator's Allocator, without a wazero runtime), and as the native side of the
// benchmarks that compare wasm with native code.
package nativestrategy

import (
	"context"
	"fmt"
	"slices"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/plugins/hash"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Allocator serves the plugins "averagely", "circle" and "hash" as version "v1"; any other name is
// an error, as a plugin that is not loaded.
type Allocator struct{}

// strategy is a built-in strategy's whole-group form (as its wasm plugin's) and its per-consumer
// form, for requests whose checks fail for some consumer.
type strategy struct {
	owners func(req *abi.Request, owners []int32) error
	each   func(req *abi.Request, self int) ([]int, error)
}

var strategies = map[string]strategy{
	"averagely": {
		owners: func(r *abi.Request, o []int32) error { averagely.Owners(o, len(r.Consumers)); return nil },
		each: func(r *abi.Request, self int) ([]int, error) {
			return averagely.Allocate(nil, len(r.Queues), len(r.Consumers), self), nil
		},
	},
	"circle": {
		owners: func(r *abi.Request, o []int32) error { circle.Owners(o, len(r.Consumers)); return nil },
		each: func(r *abi.Request, self int) ([]int, error) {
			return circle.Allocate(nil, len(r.Queues), len(r.Consumers), self), nil
		},
	},
	"hash": {
		owners: func(r *abi.Request, o []int32) error {
			ring, err := ring(r)
			if err != nil {
				return err
			}
			ring.AssignOwners(o, func(i int) (string, string, int32) {
				q := &r.Queues[i]
				return q.Topic, q.BrokerName, q.QueueID
			})
			return nil
		},
		each: func(r *abi.Request, self int) ([]int, error) {
			ring, err := ring(r)
			if err != nil {
				return nil, err
			}
			owners := make([]int, len(r.Queues))
			ring.Assign(owners, len(owners), func(i int) (string, string, int32) {
				q := &r.Queues[i]
				return q.Topic, q.BrokerName, q.QueueID
			})
			return hash.Queues(nil, owners, self), nil
		},
	},
}

func ring(r *abi.Request) (*hash.Ring, error) {
	vnodes, err := hash.ParseVirtualNodes(r.Config["vnodes"])
	if err != nil {
		return nil, err
	}
	return hash.NewRing(len(r.Consumers), func(i int) string { return r.Consumers[i] }, vnodes)
}

// Allocate answers for every consumer of req (whole-group requests, as the coordinator sends),
// with the answers the wasm plugins give: RocketMQ's argument errors per consumer, and a repeated
// consumer id answered as its first occurrence.
func (Allocator) Allocate(_ context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	s, ok := strategies[plugin]
	if !ok {
		return nil, "", fmt.Errorf("plugin %q not loaded", plugin)
	}
	n, c := len(req.Queues), len(req.Consumers)
	if rocketmq.WholeGroupChecks(n, c, func(i int) string { return req.Consumers[i] }) && distinct(req.Consumers) {
		owners := make([]int32, n)
		if err := s.owners(req, owners); err == nil {
			resp, err := abi.ResolveOwners(req, owners)
			if err != nil {
				return nil, "", err
			}
			return resp, "v1", nil
		}
	}
	resp := &abi.Response{}
	for _, cid := range req.Consumers {
		self := rocketmq.IndexOf(cid, c, func(i int) string { return req.Consumers[i] })
		err := rocketmq.Check(cid, n, c)
		var list []int
		if err == nil {
			list, err = s.each(req, self)
		}
		if err != nil {
			resp.Results = append(resp.Results, abi.Result{Err: err.Error(), Failed: true})
			continue
		}
		resp.Results = append(resp.Results, abi.Result{Indices: list})
	}
	return resp, "v1", nil
}

func distinct(ids []string) bool {
	if slices.IsSorted(ids) { // canonical order: a repeated id sits next to itself
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				return false
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			return false
		}
		seen[id] = struct{}{}
	}
	return true
}
