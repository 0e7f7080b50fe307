package abi

import (
	"slices"
	"strings"
)

// Canonicalize sorts r's queues (CompareQueues) and consumers (byte-wise), carrying their
// attributes and previous owners along, exactly as RocketMQ's RebalanceImpl sorts mqAll and cidAll
// before it calls a strategy. Duplicates are kept, as RocketMQ keeps them. Input that is already
// sorted, the common case, costs one comparison per element.
func Canonicalize(r *Request) {
	if !queuesSorted(r.Queues) {
		perm := permutation(len(r.Queues), func(a, b int) int { return CompareQueues(r.Queues[a], r.Queues[b]) })
		r.Queues = permute(r.Queues, perm)
		if r.QueueAttrs != nil {
			r.QueueAttrs = permute(r.QueueAttrs, perm)
		}
		if r.PrevOwners != nil {
			r.PrevOwners = permute(r.PrevOwners, perm)
		}
	}
	if !slices.IsSorted(r.Consumers) {
		perm := permutation(len(r.Consumers), func(a, b int) int { return strings.Compare(r.Consumers[a], r.Consumers[b]) })
		r.Consumers = permute(r.Consumers, perm)
		if r.ConsumerAttrs != nil {
			r.ConsumerAttrs = permute(r.ConsumerAttrs, perm)
		}
	}
}

// queuesSorted is slices.IsSortedFunc(qs, CompareQueues) without copying two Queue values per
// step: on the host's hot path, for every call.
func queuesSorted(qs []Queue) bool {
	for i := 1; i < len(qs); i++ {
		a, b := &qs[i-1], &qs[i]
		if sameString(a.Topic, b.Topic) && sameString(a.BrokerName, b.BrokerName) {
			if a.QueueID > b.QueueID {
				return false
			}
			continue
		}
		if CompareQueues(*a, *b) > 0 {
			return false
		}
	}
	return true
}

func permutation(n int, cmp func(a, b int) int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	slices.SortStableFunc(p, cmp)
	return p
}

// permute returns a new slice with out[i] = s[p[i]]; the caller's slice is left as it was.
func permute[T any](s []T, p []int) []T {
	out := make([]T, len(s))
	for i, j := range p {
		out[i] = s[j]
	}
	return out
}
