// memhog allocates memory until something stops it.
package main

import "github.com/allocd/allocd/abi/plugin"

var hoard [][]byte

func init() {
	plugin.Register(plugin.Info{Name: "memhog", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		for {
			b := make([]byte, 1<<20)
			b[0] = 1
			hoard = append(hoard, b)
		}
	})
}

func main() {}
