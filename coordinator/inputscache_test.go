package coordinator

import (
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

// The inputs' fingerprint is the same whether the queues' hash comes from the (group, topic)'s
// cache or is computed again: for the same binding and queue list, after a member joins, after
// the binding or the queue list changes, and for a binding longer than the hash's buffer.
func TestInputsCache(t *testing.T) {
	queues := func(n int) []abi.Queue {
		t := Topic{Name: "T", Brokers: []Broker{{Name: "a", ReadQueues: n, WriteQueues: n}, {Name: "b", ReadQueues: n, WriteQueues: n}}}
		return ReadQueues(t)
	}
	members := func(keys ...string) []*member {
		var ms []*member
		for _, k := range keys {
			ms = append(ms, &member{key: k, labels: map[string]string{"zone": k}})
		}
		return ms
	}
	plugin := func(strategy string, config map[string]string) Binding {
		return Binding{Strategy: strategy, Model: Clustering, Delivery: QueueDelivery, Config: config}
	}
	avg, hash := plugin("averagely", nil), plugin("hash", nil)
	long := plugin("averagely", map[string]string{"x": strings.Repeat("y", 40<<10)})
	q1, q2 := queues(1000), queues(1000) // equal, but two lists
	var cache *queuesPrint
	for i, step := range []struct {
		b      Binding
		queues []abi.Queue
		ms     []*member
		hit    bool
	}{
		{avg, q1, members("a", "b"), false},
		{avg, q1, members("a", "b"), true},
		{avg, q1, members("a", "b", "c"), true},
		{hash, q1, members("a", "b", "c"), false},
		{hash, q2, members("a", "b", "c"), false},
		{hash, queues(999), members("a"), false},
		{long, q1, members("a"), false},
		{long, q1, members("a"), false}, // too long to compare: never cached
		{avg, nil, members("a"), false},
	} {
		before := cache
		got := inputsBase(step.b, step.queues, step.ms, &cache)
		if want := inputsBase(step.b, step.queues, step.ms, nil); got != want {
			t.Errorf("step %d: fingerprint %s with the cache, %s without", i, got, want)
		}
		if hit := before != nil && cache == before; hit != step.hit {
			t.Errorf("step %d: cache hit %v, want %v", i, hit, step.hit)
		}
	}
}
