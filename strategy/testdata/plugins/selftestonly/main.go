// selftestonly answers the registry's self-test like averagely and traps on every other group:
// a plugin that passes its checks and fails in service, for the callers' fallback tests.
package main

import (
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/averagely"
)

var m map[string]int

func init() {
	plugin.Register(plugin.Info{Name: "selftestonly", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		if a.Group != "allocd-self-test" {
			m[a.CID] = 1 // assignment to entry in nil map: a trap
		}
		return averagely.Allocate(dst, a.MQAll.Len(), a.CIDAll.Len(), a.Self), nil
	})
}

func main() {}
