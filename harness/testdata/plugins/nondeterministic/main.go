// nondeterministic is RocketMQ's AVG_BY_CIRCLE that shifts every consumer by one on every other
// call of its instance: it keeps a call counter per instance, so the answer depends on how many
// calls the instance served before, and two instances disagree.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
)

var calls int

func init() {
	plugin.RegisterPrepared(plugin.Info{Name: "nondeterministic", Version: "1", Properties: []string{abi.PropBalanced}},
		func(*abi.View) (plugin.Func, error) {
			calls++
			shift := calls % 2
			return func(a *plugin.Args, dst []int) ([]int, error) {
				n, c := a.MQAll.Len(), a.CIDAll.Len()
				if a.Self < 0 {
					return dst, nil
				}
				for i := (a.Self + shift) % c; i < n; i += c {
					dst = append(dst, i)
				}
				return dst, nil
			}, nil
		})
}

func main() {}
