package config

import (
	"strconv"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Info is the plugin's self-description.
var Info = plugin.Info{
	Name:    "config",
	Version: "1.0.0",
	Description: "RocketMQ CONFIG: each consumer gets the queues of its label \"queues\" (a JSON array of " +
		"{\"topic\",\"brokerName\",\"queueId\"}), in that order, duplicates and overlaps kept; no label, nothing",
	// Nothing is promised beyond what each consumer was configured with: queues may be left to
	// nobody, and given twice or to two consumers, as Java allows.
	Properties: []string{abi.PropPartial, abi.PropOverlapping},
}

// Prepare resolves every member's list once, on the first consumer asked about, so that
// configured queues missing from mqAll are logged once per call, whatever the targets.
func Prepare(v *abi.View) (plugin.Func, error) {
	var lists [][]int // per consumer index, indices into mqAll
	var errs []error
	resolve := func() {
		c := v.NumConsumers()
		lists, errs = make([][]int, c), make([]error, c)
		missing, firstCID := 0, ""
		var first abi.Queue
		for j := range c {
			text, ok := v.ConsumerLabel(j, rocketmq.LabelQueues)
			if !ok {
				continue
			}
			list, err := Parse(text)
			if err != nil {
				errs[j] = &rocketmq.ArgumentError{Msg: "config: label \"" + rocketmq.LabelQueues + "\" of consumer " +
					strconv.Quote(v.Consumer(j)) + ": " + err.Error()}
				continue
			}
			var m int
			var q abi.Queue
			lists[j], m, q = Allocate(nil, list, v.NumQueues(), v.Queue)
			if m > 0 && missing == 0 {
				first, firstCID = q, v.Consumer(j)
			}
			missing += m
		}
		if missing > 0 {
			plugin.Log(plugin.LogWarn, "config: "+strconv.Itoa(missing)+" configured queue(s) are not in mqAll and are left out; the first is "+
				first.String()+" of consumer "+strconv.Quote(firstCID))
		}
	}
	return func(a *plugin.Args, dst []int) ([]int, error) {
		if a.Self < 0 {
			return dst, nil // not a member: no label, nothing (Java would return its list)
		}
		if lists == nil {
			resolve()
		}
		if errs[a.Self] != nil {
			return dst, errs[a.Self]
		}
		return append(dst, lists[a.Self]...), nil
	}, nil
}
