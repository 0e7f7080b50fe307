// Package circle reproduces RocketMQ's AVG_BY_CIRCLE strategy (Java
// AllocateMessageQueueAveragelyByCircle): queues are dealt round-robin, consumer i getting
// i, i+c, i+2c, ... in mqAll order.
//
// It is a pure function of its arguments and never allocates beyond appending to dst.
package circle

// Allocate appends to dst the indices (into mqAll, 0..n-1) that AllocateMessageQueueAveragelyByCircle
// gives the consumer at index self of c consumers (self = first occurrence of cid in cidAll; self<0
// means not a member: append nothing). Callers run rocketmq.Check first; n<=0, c<=0 or self>=c
// append nothing.
//
// Example: n=10, c=4 gives [0 4 8] [1 5 9] [2 6] [3 7] to self 0..3.
func Allocate(dst []int, n, c, self int) []int {
	if n <= 0 || c <= 0 || self < 0 || self >= c || self >= n {
		return dst
	}
	// Java: for (i = index; i < n; i++) if (i % c == index) add(i). With 0 <= index < c that is
	// exactly index, index+c, index+2c, ... below n.
	for k := self; ; k += c {
		dst = append(dst, k)
		if k >= n-c { // next k would be >= n; written this way it cannot overflow
			return dst
		}
	}
}

// Owners writes into owners (one entry per queue of mqAll) the index of the consumer, of c
// distinct consumers, that Allocate gives each queue: queue i goes to i mod c. It is the whole
// group's answer in one pass; each consumer's list is its queues in mqAll order, as Allocate gives
// them. c <= 0 writes -1 everywhere.
func Owners(owners []int32, c int) {
	if c <= 0 {
		for i := range owners {
			owners[i] = -1
		}
		return
	}
	// The first c entries are 0..c-1, and the rest repeat them: doubling copies of a prefix whose
	// length is a multiple of c, so that a whole group costs c stores and log2(n/c) calls of copy
	// (one memory.copy each in a wasm guest, where a loop iteration costs about 60 instructions).
	head := owners[:min(c, len(owners))]
	i := int32(0)
	for rest := head; len(rest) > 0; {
		if len(rest) >= 8 { // eight stores an iteration: see averagely's fill
			b := rest[:8:8]
			b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7] = i, i+1, i+2, i+3, i+4, i+5, i+6, i+7
			rest, i = rest[8:], i+8
			continue
		}
		rest[0] = i
		rest, i = rest[1:], i+1
	}
	for k := len(head); k < len(owners); k *= 2 {
		copy(owners[k:], owners[:k])
	}
}
