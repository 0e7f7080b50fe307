// first gives every queue to the first consumer: the README's 20-line plugin.
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "first", Version: "1.0.0"},
		func(a *plugin.Args, dst []int) ([]int, error) {
			if a.Self == 0 {
				for i := 0; i < a.MQAll.Len(); i++ {
					dst = append(dst, i)
				}
			}
			return dst, nil
		})
}

func main() {}
