package machineroom

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Info is the plugin's self-description.
var Info = plugin.Info{
	Name:    "machineroom",
	Version: "1.0.0",
	Description: "RocketMQ MACHINE_ROOM: the queues of brokers ROOM@name with ROOM in consumeridcs, " +
		"a block of |P|/c each, then one leftover each; other rooms' queues go to no one",
	// Queues of rooms outside the set go to no one, and the block-then-leftover split is not
	// the balance the harness checks, so nothing beyond a valid answer is promised.
	Properties: []string{abi.PropPartial},
	Config: map[string]string{
		rocketmq.ConfigConsumerIDCs: `JSON array of the rooms to consume, e.g. ["IDC1","IDC2"]; never set fails every member once a broker name is ROOM@broker, as Java does`,
	},
	// Without the set, every member fails on a group with a broker ROOM@broker (the harness's
	// "broker@east"): check with that room listed.
	CheckConfig: map[string]string{rocketmq.ConfigConsumerIDCs: `["broker"]`},
}

// Prepare filters mqAll once per request; each consumer's answer is then a slice of the filtered
// list.
func Prepare(v *abi.View) (plugin.Func, error) {
	text, present := v.Config(rocketmq.ConfigConsumerIDCs)
	rooms, err := ParseRooms(text, present)
	if err != nil {
		return nil, err
	}
	n, c := v.NumQueues(), v.NumConsumers()
	var p []int
	var filterErr error
	filtered := false
	return func(a *plugin.Args, dst []int) ([]int, error) {
		if err := rocketmq.Check(a.CID, n, c); err != nil {
			return dst, err
		}
		if a.Self < 0 {
			return dst, nil
		}
		if !filtered {
			p, filterErr = Filter(nil, rooms, n, func(i int) string { return v.Queue(i).BrokerName })
			filtered = true
		}
		if filterErr != nil {
			return dst, filterErr
		}
		return Allocate(dst, p, c, a.Self), nil
	}, nil
}
