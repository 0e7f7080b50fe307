// trap panics on every call with a nil map write.
package main

import "github.com/allocd/allocd/abi/plugin"

var m map[string]int

func init() {
	plugin.Register(plugin.Info{Name: "trap", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		m[a.CID] = 1 // assignment to entry in nil map
		return dst, nil
	})
}

func main() {}
