// Command wasm is the sticky plugin: consistent hashing with bounded loads that keeps queues with
// their previous owners and prefers a consumer in the queue's zone (package sticky). The binding's
// config key "balance" sets c, the load bound factor (default 1.25, at least 1); "vnodes" the ring
// points per consumer (default 40). Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/sticky"
)

func init() {
	plugin.RegisterWholeGroup(plugin.Info{
		Name:    "sticky",
		Version: "1.0.0",
		Description: "consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): " +
			"no consumer gets more than ceil(balance x average) queues; a queue stays with its previous owner " +
			"while that owner is alive and under the bound; a queue prefers a consumer of its zone",
		Properties: []string{abi.PropSticky},
		Config: map[string]string{
			"balance": "load bound factor c: at most ceil(c x average) queues per consumer (default 1.25, >= 1)",
			"vnodes":  "ring points per consumer (default 40, 1..1000)",
		},
	}, prepare, wholeGroup)
}

// memo keeps the last call's ring and working storage for the next: an instance serves one call
// at a time.
var memo sticky.Memo

func options(v *abi.View) (sticky.Options, error) {
	balance, _ := v.Config("balance")
	vnodes, _ := v.Config("vnodes")
	return sticky.ParseOptions(balance, vnodes)
}

// wholeGroup answers a whole-group request in ABI 1.1's owner form: every consumer's queues are
// in mqAll order, as the per-consumer lists of prepare are.
func wholeGroup(v *abi.View, owners []int32) (bool, error) {
	opt, err := options(v)
	if err != nil {
		return false, err // as prepare: the whole call fails
	}
	memo.AssignView(v, opt, owners)
	return true, nil
}

// prepare computes the whole group's assignment once; each consumer's answer is then a slice of
// it. A consumer that is not in cidAll gets nothing. It serves requests with TARGETS, with a
// repeated consumer id, or from a 1.0 host.
func prepare(v *abi.View) (plugin.Func, error) {
	opt, err := options(v)
	if err != nil {
		return nil, err
	}
	var starts, byOwner []int
	return func(a *plugin.Args, dst []int) ([]int, error) {
		if a.Self < 0 {
			return dst, nil
		}
		if starts == nil {
			owners := memo.Assign(sticky.FromView(v), opt)
			starts, byOwner = sticky.Buckets(owners, v.NumConsumers())
		}
		return append(dst, byOwner[starts[a.Self]:starts[a.Self+1]]...), nil
	}, nil
}

func main() {}
