// Command wasm is the averagely plugin: RocketMQ's AVG (AllocateMessageQueueAveragely) as an
// allocd strategy. Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/rocketmq"
)

func init() {
	plugin.Register(plugin.Info{
		Name:        "averagely",
		Version:     "1.0.0",
		Description: "RocketMQ AVG: contiguous blocks of mqAll, the first n mod c consumers one queue more",
		Properties:  []string{abi.PropBalanced},
	}, func(a *plugin.Args, dst []int) ([]int, error) {
		n, c := a.MQAll.Len(), a.CIDAll.Len()
		if err := rocketmq.Check(a.CID, n, c); err != nil {
			return dst, err
		}
		return averagely.Allocate(dst, n, c, a.Self), nil
	})
}

func main() {}
