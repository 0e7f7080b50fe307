// loop never returns.
package main

import "github.com/allocd/allocd/abi/plugin"

var sink int

func init() {
	plugin.Register(plugin.Info{Name: "loop", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		for i := 0; ; i++ {
			sink += i
		}
	})
}

func main() {}
