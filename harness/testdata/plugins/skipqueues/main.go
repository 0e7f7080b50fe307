// skipqueues cuts mqAll into blocks of n/c queues and forgets the remainder: the last n mod c
// queues go to nobody, and it does not declare "partial".
package main

import "github.com/allocd/allocd/abi/plugin"

func init() {
	plugin.Register(plugin.Info{Name: "skipqueues", Version: "1"}, func(a *plugin.Args, dst []int) ([]int, error) {
		n, c := a.MQAll.Len(), a.CIDAll.Len()
		if a.Self < 0 {
			return dst, nil
		}
		size := n / c
		for i := a.Self * size; i < (a.Self+1)*size; i++ {
			dst = append(dst, i)
		}
		return dst, nil
	})
}

func main() {}
