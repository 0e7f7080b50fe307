// outofrange answers with a queue index past the end of mqAll.
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "outofrange", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		return append(dst, a.MQAll.Len()+5), nil
	})
}

func main() {}
