// Command wasm is the circle plugin: RocketMQ's AVG_BY_CIRCLE
// (AllocateMessageQueueAveragelyByCircle) as an allocd strategy. Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/plugins/rocketmq"
)

func init() {
	plugin.Register(plugin.Info{
		Name:        "circle",
		Version:     "1.0.0",
		Description: "RocketMQ AVG_BY_CIRCLE: consumer i takes queues i, i+c, i+2c, ...",
		Properties:  []string{abi.PropBalanced},
	}, func(a *plugin.Args, dst []int) ([]int, error) {
		n, c := a.MQAll.Len(), a.CIDAll.Len()
		if err := rocketmq.Check(a.CID, n, c); err != nil {
			return dst, err
		}
		return circle.Allocate(dst, n, c, a.Self), nil
	})
}

func main() {}
