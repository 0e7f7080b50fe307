// Package averagely reproduces RocketMQ's AVG strategy (Java AllocateMessageQueueAveragely):
// mqAll is cut into contiguous blocks, one per consumer in cidAll order, the first n mod c
// consumers getting one queue more.
//
// It is a pure function of its arguments and never allocates beyond appending to dst.
package averagely

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
	if c <= 0 {
		fill(owners, -1)
		return
	}
	fillBlocks(owners, c)
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
