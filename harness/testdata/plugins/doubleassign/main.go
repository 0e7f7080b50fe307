// doubleassign is RocketMQ's AVG with an off-by-one: each consumer's block runs one queue too far,
// so the first queue of every block after the first is given to two consumers.
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "doubleassign", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		n, c := a.MQAll.Len(), a.CIDAll.Len()
		if a.Self < 0 || n == 0 {
			return dst, nil
		}
		size, rem := n/c, n%c
		start := a.Self*size + min(a.Self, rem)
		end := start + size
		if a.Self < rem {
			end++
		}
		for i := start; i <= end && i < n; i++ { // "<=": the bug
			dst = append(dst, i)
		}
		return dst, nil
	})
}

func main() {}
