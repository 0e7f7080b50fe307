package nearby

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Info is the plugin's self-description.
var Info = plugin.Info{
	Name:    "nearby",
	Version: "1.0.0",
	Description: "RocketMQ MACHINE_ROOM_NEARBY: the inner strategy over each zone's queues and consumers; " +
		"the queues of a zone without consumers over all consumers, zone by zone",
	// Every queue is given (the inner strategies cover), and within a zone the inner's
	// promises hold; across zones the load is not balanced (orphan zones are split one by one,
	// their leftovers all to the first consumers), so "balanced" is not promised.
	Properties: []string{abi.PropZoned},
	Config: map[string]string{
		rocketmq.ConfigInner:  "the strategy within a zone: averagely (default), circle or hash",
		rocketmq.ConfigVnodes: "hash's virtual nodes per consumer (default 10)",
	},
}

// Prepare reads the inner strategy once per request, and resolves the rooms on the first member
// asked about (after Java's argument check, which comes first even for a group without rooms);
// each member's answer then comes from the same Group.
func Prepare(v *abi.View) (plugin.Func, error) {
	innerName, _ := v.Config(rocketmq.ConfigInner)
	vnodes, _ := v.Config(rocketmq.ConfigVnodes)
	inner, err := ParseInner(innerName, vnodes)
	if err != nil {
		return nil, err
	}
	n, c := v.NumQueues(), v.NumConsumers()
	var g *Group
	return func(a *plugin.Args, dst []int) ([]int, error) {
		if err := rocketmq.Check(a.CID, n, c); err != nil {
			return dst, err
		}
		if a.Self < 0 {
			return dst, nil
		}
		if g == nil {
			g = New(Input{
				N: n, C: c,
				Queue: func(i int) (string, string, int32) {
					q := v.Queue(i)
					return q.Topic, q.BrokerName, q.QueueID
				},
				Consumer:     v.Consumer,
				QueueRoom:    func(i int) (string, bool) { return v.QueueLabel(i, rocketmq.LabelZone) },
				ConsumerRoom: func(j int) (string, bool) { return v.ConsumerLabel(j, rocketmq.LabelZone) },
			}, inner)
		}
		return g.Allocate(dst, a.Self)
	}, nil
}
