// doubleassign gives every consumer queue 0.
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "doubleassign", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		return append(dst, 0), nil
	})
}

func main() {}
