// unbalanced promises "balanced" but gives every consumer n/c queues and the last consumer the
// whole remainder as well, so with n mod c >= 2 the last one has two or more queues too many.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
)

func init() {
	plugin.Register(plugin.Info{Name: "unbalanced", Version: "1", Properties: []string{abi.PropBalanced}},
		func(a *plugin.Args, dst []int) ([]int, error) {
			n, c := a.MQAll.Len(), a.CIDAll.Len()
			if a.Self < 0 {
				return dst, nil
			}
			size := n / c
			end := (a.Self + 1) * size
			if a.Self == c-1 {
				end = n
			}
			for i := a.Self * size; i < end; i++ {
				dst = append(dst, i)
			}
			return dst, nil
		})
}

func main() {}
