// Package averagely reproduces RocketMQ's AVG strategy (Java AllocateMessageQueueAveragely):
// mqAll is cut into contiguous blocks, one per consumer in cidAll order, the first n mod c
// consumers getting one queue more.
//
// It is a pure function of its arguments and never allocates beyond appending to dst.
package averagely

import (
	"encoding/binary"
	"unsafe"
)

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
	// block's blocks in closed form: the first n mod c consumers take n/c+1 queues, the others
	// n/c. With n < c, n/c is 0: the first n consumers take one queue each.
	size, bigger := n/c, n%c
	// A block is written a chunk of 16 entries at a time from its start, its last chunk running
	// over into the blocks after it, which are written later; so a block costs one loop iteration
	// when it has 16 queues or fewer, and no branch on its length (Go's wasm code pays a trip
	// through its function's dispatch table for every loop iteration and taken branch;
	// RATIONALE.md). Only the blocks that end within 15 entries of the end, whose last chunk would
	// run past it, are written exactly.
	q, k := 0, 0 // consumer k's block starts at q
	for ; k < c; k++ {
		end := q + size
		if k < bigger {
			end++
		}
		if end+15 > n {
			break
		}
		x := uint64(uint32(k)) * (1<<32 | 1) // two entries of k
		for p := q; ; {                      // end > q: blocks of 0 queues end at n, above
			// Sixteen entries, with one 64-bit store for two (the compiler merges binary's
			// byte stores; an *[8]uint64 would be misaligned at an odd p).
			b := (*[64]byte)(unsafe.Pointer(&owners[p]))
			binary.NativeEndian.PutUint64(b[0:], x)
			binary.NativeEndian.PutUint64(b[8:], x)
			binary.NativeEndian.PutUint64(b[16:], x)
			binary.NativeEndian.PutUint64(b[24:], x)
			binary.NativeEndian.PutUint64(b[32:], x)
			binary.NativeEndian.PutUint64(b[40:], x)
			binary.NativeEndian.PutUint64(b[48:], x)
			binary.NativeEndian.PutUint64(b[56:], x)
			if p += 16; p >= end {
				break
			}
		}
		q = end
	}
	for ; q < n; k++ {
		end := q + size
		if k < bigger {
			end++
		}
		fill(owners[q:end], int32(k))
		q = end
	}
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
