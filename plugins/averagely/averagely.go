// Package averagely reproduces RocketMQ's AVG strategy (Java AllocateMessageQueueAveragely):
// mqAll is cut into contiguous blocks, one per consumer in cidAll order, the first n mod c
// consumers getting one queue more.
//
// It is a pure function of its arguments and never allocates beyond appending to dst.
package averagely

import "unsafe"

// Allocate appends to dst the indices (into mqAll, 0..n-1) that AllocateMessageQueueAveragely gives
// the consumer at index self of c consumers (self = first occurrence of cid in cidAll; self<0 means
// not a member: append nothing). Callers run rocketmq.Check first; n<=0, c<=0 or self>=c append
// nothing.
//
// Example: n=10, c=4 gives [0 1 2] [3 4 5] [6 7] [8 9] to self 0..3.
func Allocate(dst []int, n, c, self int) []int {
	if n <= 0 || c <= 0 || self < 0 || self >= c {
		return dst
	}
	// Java, with index = self:
	//   mod = n % c
	//   averageSize = n <= c ? 1 : (mod > 0 && index < mod ? n/c + 1 : n/c)
	//   startIndex = (mod > 0 && index < mod) ? index*averageSize : index*averageSize + mod
	//   range = min(averageSize, n - startIndex)
	start, count := block(n, c, self)
	for i := 0; i < count; i++ {
		dst = append(dst, start+i)
	}
	return dst
}

// block returns the first index and the length of consumer self's block (0 <= self < c, n > 0).
func block(n, c, self int) (start, count int) {
	mod := n % c
	bigger := mod > 0 && self < mod
	size := n / c
	switch {
	case n <= c:
		size = 1
	case bigger:
		size++
	}
	start = self*size + mod
	if bigger {
		start = self * size
	}
	return start, min(size, n-start)
}

// Owners writes into owners (one entry per queue of mqAll, n = len(owners)) the index of the
// consumer, of c distinct consumers, whose block holds each queue: the whole group's answer in one
// pass, each consumer's list being its queues in mqAll order as Allocate gives them. c <= 0 writes
// -1 everywhere. It writes nothing outside owners.
func Owners(owners []int32, c int) {
	n := len(owners)
	if c <= 0 {
		fill(owners, -1)
		return
	}
	// Go's wasm code pays a trip through its function's dispatch table for every loop iteration
	// and taken branch, and wazero some eight instructions for every store (RATIONALE.md). So a
	// block is written 16 entries at a time with eight 8-byte stores, from its start, its last
	// chunk running over into the blocks after it, which are written later; with no branch on its
	// length. The blocks that end within 15 entries of the end, whose last chunk would run past it,
	// are written exactly.
	b := blocks{size: n / c, bigger: n % c}
	q, k := 0, 0 // consumer k's block starts at q
	if b.size < 16 || b.size == 16 && b.bigger == 0 {
		// Every block fits in one chunk: four blocks an iteration.
		for ; k+4 <= c; k += 4 {
			q1 := b.end(q, k)
			q2 := b.end(q1, k+1)
			q3 := b.end(q2, k+2)
			if q3+16 > n {
				break
			}
			x := twice(k)
			chunk(owners, q, x)
			chunk(owners, q1, x+twice(1))
			chunk(owners, q2, x+twice(2))
			chunk(owners, q3, x+twice(3))
			q = b.end(q3, k+3)
		}
	}
	for ; k < c; k++ {
		end := b.end(q, k)
		if end+15 > n {
			break
		}
		x := twice(k)
		for p := q; ; { // end > q: blocks of 0 queues end at n, above
			chunk(owners, p, x)
			if p += 16; p >= end {
				break
			}
		}
		q = end
	}
	for ; q < n; k++ {
		end := b.end(q, k)
		fill(owners[q:end], int32(k))
		q = end
	}
}

// blocks are the group's blocks in closed form, where block follows Java's formula for one
// consumer (TestOwnersIsAllocate checks that they agree): the first bigger (n mod c) consumers
// take size+1 (n/c+1) queues, the others size. With n < c, size is 0: the first n consumers take
// one queue each.
type blocks struct{ size, bigger int }

// end returns the end of consumer k's block, which starts at q.
func (b blocks) end(q, k int) int {
	if k < b.bigger {
		q++
	}
	return q + b.size
}

// twice is two entries of v, as one uint64.
func twice(v int) uint64 { return uint64(uint32(v)) * (1<<32 | 1) }

// chunk writes the 16 entries of owners from p on (p+16 <= len(owners)), two entries of x to each
// 8-byte store. The store may be unaligned: the machines allocd runs on (amd64, arm64, wasm)
// allow that, and so does checkptr for a type without pointers.
func chunk(owners []int32, p int, x uint64) {
	s := (*[8]uint64)(unsafe.Pointer(&owners[p]))
	s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7] = x, x, x, x, x, x, x, x
}

// fill sets every entry of s to v, eight entries an iteration (RATIONALE.md).
func fill(s []int32, v int32) {
	for len(s) >= 8 {
		b := s[:8:8]
		b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7] = v, v, v, v, v, v, v, v
		s = s[8:]
	}
	for i := range s {
		s[i] = v
	}
}
