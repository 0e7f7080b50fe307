// Package route holds the producer-side queue choice shared by the daemon and its clients:
// which writable queue a sharding key maps to. It depends on nothing but the standard library
// and abi, so the Go client links the very function the daemon's GET /v1/topics/{topic}/route?key=K
// answers with, and the two can never disagree.
package route

import (
	"unicode/utf16"

	"github.com/allocd/allocd/abi"
)

// ShardQueue picks the queue for sharding key key among queues, as RocketMQ's
// SelectMessageQueueByHash does: Java's String.hashCode of the key, modulo the number of queues,
// negative remainders made positive. The choice is stable for a given queue list, and a Java
// producer using that selector over the same list picks the same queue. It reports false when
// queues is empty.
func ShardQueue(queues []abi.Queue, key string) (abi.Queue, bool) {
	if len(queues) == 0 {
		return abi.Queue{}, false
	}
	v := JavaHash(key) % int32(len(queues))
	if v < 0 {
		v = -v
	}
	return queues[v], true
}

// JavaHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in
// wrapping 32-bit arithmetic. Invalid UTF-8 counts as U+FFFD per bad byte, as Go decodes it.
func JavaHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
