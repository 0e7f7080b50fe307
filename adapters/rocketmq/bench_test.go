package rocketmq

import (
	"math/rand/v2"
	"testing"
)

// The two halves of one rebalance's 64 calls (bench/ holds the comparison with the client):
// "hit" is one consumer's call answered from the cache, "miss" the call after cidAll changed,
// which asks the plugin for the whole group, and "miss-resized" one after a member left or came
// back. 1,024 queues on 1-4 brokers, 64 consumers.
//
//	go test -run '^$' -bench 'Allocate' -count 6 .
func BenchmarkAllocate(b *testing.B) {
	s := open(b, "averagely", Config{})
	r := rand.New(rand.NewPCG(1, 2))
	mqAll, c0 := rocketmqGroup(r, 1024, 64)
	_, c1 := rocketmqGroup(r, 1024, 64)
	cids := [2][]string{c0, c1}
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
	// a member leaving and coming back: every miss is of another group size
	resized := [2][]string{c0, c0[:63]}
	b.Run("miss-resized", func(b *testing.B) {
		n := 0
		for b.Loop() {
			if len(s.Allocate("CG", resized[n%2][0], mqAll, resized[n%2])) == 0 {
				b.Fatal("no queues")
			}
			n++
		}
	})
}
