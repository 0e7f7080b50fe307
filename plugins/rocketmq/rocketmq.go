// Package rocketmq holds what RocketMQ's queue-allocation strategies share: the argument check of
// the Java base class AllocateMessageQueueStrategy and the cidAll.indexOf lookup.
//
// The strategy packages (averagely, circle, hash) are plain, allocation-light Go that compiles
// both natively and to wasip1; this package must stay free of I/O in its non-test code paths so
// plugins can import it. The behavioural reference is RocketMQ's Java client; see
// ../shared/specs/rocketmq-strategies.md.
package rocketmq

import "strconv"

// Java's IllegalArgumentException messages, in the order Check tests them.
const (
	MsgEmptyCID    = "currentCID is empty"
	MsgEmptyMQAll  = "mqAll is null or mqAll empty"
	MsgEmptyCIDAll = "cidAll is null or cidAll empty"
)

// ArgumentError is the Go form of the IllegalArgumentException a Java strategy throws.
// Error returns Msg, which is exactly Java's message (without the exception class name).
type ArgumentError struct{ Msg string }

func (e *ArgumentError) Error() string { return e.Msg }

// Check runs RocketMQ's shared argument check (AllocateMessageQueueStrategy base class) in Java's
// order: an empty cid wins over an empty mqAll, which wins over an empty cidAll. A cid made only of
// whitespace is accepted, as in Java. A cid that is not in cidAll is not an error here: Java logs
// it and returns an empty list, which callers get from IndexOf returning -1.
//
// It returns an *ArgumentError whose Error() is exactly Java's message: "currentCID is empty",
// "mqAll is null or mqAll empty", "cidAll is null or cidAll empty". A null Java list is an empty
// one here (count 0).
func Check(cid string, numQueues, numConsumers int) error {
	switch {
	case cid == "":
		return &ArgumentError{Msg: MsgEmptyCID}
	case numQueues <= 0:
		return &ArgumentError{Msg: MsgEmptyMQAll}
	case numConsumers <= 0:
		return &ArgumentError{Msg: MsgEmptyCIDAll}
	}
	return nil
}

// WholeGroupChecks reports whether Check passes for every one of the numConsumers consumers
// (consumer(i) gives the id): the condition under which a strategy may answer the whole group
// in one pass without a per-consumer error.
func WholeGroupChecks(numQueues, numConsumers int, consumer func(int) string) bool {
	if numQueues <= 0 || numConsumers <= 0 {
		return false
	}
	for i := range numConsumers {
		if consumer(i) == "" {
			return false
		}
	}
	return true
}

// WholeGroupChecksEmpty is WholeGroupChecks for a caller that knows at once whether some
// consumer id is empty (abi.View.HasEmptyConsumer reads it from the string table's offsets, where
// building every id through consumer costs a wasm guest a call per consumer).
func WholeGroupChecksEmpty(numQueues, numConsumers int, emptyConsumer bool) bool {
	return numQueues > 0 && numConsumers > 0 && !emptyConsumer
}

// IndexOf returns the index of the first occurrence of cid among n consumers (consumer(i) gives the
// id), or -1, like Java's cidAll.indexOf(currentCID): exact, case-sensitive equality.
func IndexOf(cid string, n int, consumer func(int) string) int {
	for i := 0; i < n; i++ {
		if consumer(i) == cid {
			return i
		}
	}
	return -1
}

// QueueString is Java's MessageQueue.toString(): "MessageQueue [topic=T, brokerName=B, queueId=N]",
// the key CONSISTENT_HASH hashes and the name Java's messages give a queue.
func QueueString(topic, brokerName string, queueID int32) string {
	return string(AppendQueueID(AppendQueuePrefix(nil, topic, brokerName), queueID))
}

// AppendQueuePrefix appends the part of QueueString before the queue id.
func AppendQueuePrefix(b []byte, topic, brokerName string) []byte {
	b = append(b, "MessageQueue [topic="...)
	b = append(b, topic...)
	b = append(b, ", brokerName="...)
	b = append(b, brokerName...)
	return append(b, ", queueId="...)
}

// AppendQueueID completes a QueueString begun by AppendQueuePrefix.
func AppendQueueID(b []byte, queueID int32) []byte {
	b = strconv.AppendInt(b, int64(queueID), 10)
	return append(b, ']')
}
