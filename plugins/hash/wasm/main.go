// Command wasm is the hash plugin: RocketMQ's CONSISTENT_HASH
// (AllocateMessageQueueConsistentHash, MD5 ring) as an allocd strategy. The binding's config key
// "vnodes" sets the virtual nodes per consumer (default 10; 0 gives nobody anything, as in Java).
// Build it with `make plugins`.
package main

import (
	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/hash"
	"github.com/allocd/allocd/plugins/rocketmq"
)

func init() {
	plugin.RegisterWholeGroup(plugin.Info{
		Name:        "hash",
		Version:     "1.0.0",
		Description: "RocketMQ CONSISTENT_HASH: an MD5 ring with virtual nodes per consumer",
		Config:      map[string]string{"vnodes": "virtual nodes per consumer (default 10, 0 allowed, negative refused)"},
	}, prepare, wholeGroup)
}

// memo keeps the last whole-group request's MD5 hashes for the next: an instance serves one call
// at a time, and the SDK's strings live as long as the instance.
var memo hash.Memo

// wholeGroup answers every consumer from one ring in one pass (ABI 1.1's owner form). A request
// that RocketMQ's checks fail for some consumer, or whose ring cannot be built, goes through
// prepare's per-consumer answers instead, which report the error for each consumer.
func wholeGroup(v *abi.View, owners []int32) (bool, error) {
	vnodesText, _ := v.Config("vnodes")
	vnodes, err := hash.ParseVirtualNodes(vnodesText)
	if err != nil {
		return false, err // as prepare: the whole call fails
	}
	n, c := v.NumQueues(), v.NumConsumers()
	if !rocketmq.WholeGroupChecksEmpty(n, c, v.HasEmptyConsumer()) {
		return false, nil
	}
	// The memo keeps the ids: the last ones again when the request's are those (SameConsumers
	// reads none), else a slice of their own, read in one call of the View.
	ids := memo.RingIDs()
	if ids == nil || !v.SameConsumers(ids) {
		ids = v.Consumers(make([]string, 0, c))
	}
	ring, err := hash.NewRingMemoIDs(ids, vnodes, &memo)
	if err != nil {
		return false, nil
	}
	ring.AssignOwnerRuns(owners, v.QueueRun)
	return true, nil
}

// prepare builds the ring once per request and buckets every queue by its owner, so each
// consumer's answer is a slice of one array: Java rebuilds the ring for every consumer.
func prepare(v *abi.View) (plugin.Func, error) {
	vnodesText, _ := v.Config("vnodes")
	vnodes, err := hash.ParseVirtualNodes(vnodesText)
	if err != nil {
		return nil, err
	}
	n, c := v.NumQueues(), v.NumConsumers()
	var starts, byOwner []int // byOwner[starts[o]:starts[o+1]]: owner o's queues in mqAll order
	bucket := func() error {
		ring, err := hash.NewRing(c, v.Consumer, vnodes)
		if err != nil {
			return err
		}
		owners := make([]int, n)
		ring.Assign(owners, n, func(i int) (string, string, int32) {
			q := v.Queue(i)
			return q.Topic, q.BrokerName, q.QueueID
		})
		starts = make([]int, c+1)
		for _, o := range owners {
			if o >= 0 {
				starts[o+1]++
			}
		}
		for o := range c {
			starts[o+1] += starts[o]
		}
		byOwner = make([]int, starts[c])
		next := append([]int(nil), starts[:c]...)
		for i, o := range owners {
			if o >= 0 {
				byOwner[next[o]] = i
				next[o]++
			}
		}
		return nil
	}
	return func(a *plugin.Args, dst []int) ([]int, error) {
		if err := rocketmq.Check(a.CID, n, c); err != nil {
			return dst, err
		}
		if a.Self < 0 {
			return dst, nil
		}
		if starts == nil {
			if err := bucket(); err != nil {
				return dst, err
			}
		}
		return append(dst, byOwner[starts[a.Self]:starts[a.Self+1]]...), nil
	}, nil
}

func main() {}
