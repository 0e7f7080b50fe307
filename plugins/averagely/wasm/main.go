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
	plugin.RegisterWholeGroup(plugin.Info{
		Name:        "averagely",
		Version:     "1.0.0",
		Description: "RocketMQ AVG: contiguous blocks of mqAll, the first n mod c consumers one queue more",
		Properties:  []string{abi.PropBalanced},
	}, func(*abi.View) (plugin.Func, error) { return each, nil }, wholeGroup)
}

// each answers one consumer.
func each(a *plugin.Args, dst []int) ([]int, error) {
	n, c := a.MQAll.Len(), a.CIDAll.Len()
	if err := rocketmq.Check(a.CID, n, c); err != nil {
		return dst, err
	}
	return averagely.Allocate(dst, n, c, a.Self), nil
}

// wholeGroup answers every consumer in one pass (ABI 1.1's owner form). A request that RocketMQ's
// checks fail for some consumer (no queues, an empty consumer id) goes through each instead.
func wholeGroup(v *abi.View, owners []int32) (bool, error) {
	if !rocketmq.WholeGroupChecksEmpty(v.NumQueues(), v.NumConsumers(), v.HasEmptyConsumer()) {
		return false, nil
	}
	averagely.Owners(owners, v.NumConsumers())
	return true, nil
}

func main() {}
