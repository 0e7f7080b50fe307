// badowners answers a whole-group request in the owner form with the last queue's owner one past
// the last consumer, and every other request with no queues.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
)

func init() {
	none := func(a *plugin.Args, dst []int) ([]int, error) { return dst, nil }
	plugin.RegisterWholeGroup(plugin.Info{Name: "badowners", Version: "1"},
		func(*abi.View) (plugin.Func, error) { return none, nil },
		func(req *abi.View, owners []int32) (bool, error) {
			for q := range owners {
				owners[q] = int32(q % req.NumConsumers())
			}
			if n := len(owners); n > 0 {
				owners[n-1] = int32(req.NumConsumers())
			}
			return true, nil
		})
}

func main() {}
