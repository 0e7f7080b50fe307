package rocketmq

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The two halves of one rebalance's 64 calls (bench/ holds the comparison with the client):
// "hit" is one consumer's call answered from the cache, "miss" the call after cidAll changed,
// which asks the plugin for the whole group. 1,024 queues on 4 brokers, 64 consumers.
//
//	go test -run '^$' -bench 'Allocate' -count 6 .
func BenchmarkAllocate(b *testing.B) {
	s := open(&testing.T{}, "averagely", Config{})
	var mqAll []*primitive.MessageQueue
	for br := range 4 {
		broker := fmt.Sprintf("broker-%c", 'a'+br)
		for q := range 256 {
			mqAll = append(mqAll, &primitive.MessageQueue{Topic: "TopicTest", BrokerName: broker, QueueId: q})
		}
	}
	var cids [2][]string
	for v := range cids {
		for i := range 64 {
			cids[v] = append(cids[v], fmt.Sprintf("10.0.%d.%d@%d", v, i, 4000+i))
		}
		slices.Sort(cids[v])
	}
	b.Run("hit", func(b *testing.B) {
		s.Allocate("CG", cids[0][0], mqAll, cids[0])
		n := 0
		for b.Loop() {
			if len(s.Allocate("CG", cids[0][n%64], mqAll, cids[0])) == 0 {
				b.Fatal("no queues")
			}
			n++
		}
	})
	b.Run("miss", func(b *testing.B) {
		n := 0
		for b.Loop() {
			if len(s.Allocate("CG", cids[n%2][0], mqAll, cids[n%2])) == 0 {
				b.Fatal("no queues")
			}
			n++
		}
	})
}
