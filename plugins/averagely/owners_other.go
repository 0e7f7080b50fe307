//go:build !wasm || tinygo

package averagely

import "unsafe"

// fillBlocks writes Owners' answer for c > 0 consumers (in the wasm guest: owners_wasm.s).
func fillBlocks(owners []int32, c int) {
	n := len(owners)
	// A block is written 16 entries at a time with eight 8-byte stores, from its start, its last
	// chunk running over into the blocks after it, which are written later; with no branch on its
	// length. The blocks that end within 15 entries of the end, whose last chunk would run past it,
	// are written exactly. (This was the guest's code too, before owners_wasm.s: Go's wasm pays
	// a trip through its function's dispatch table for every loop iteration and taken branch.)
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
