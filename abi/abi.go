// Package abi is the contract between the allocd host and its strategy plugins: the data types, the
// binary request and response encodings (one codec serves both sides), the ABI version and the
// plugin's self-description. ABI.md beside this file specifies every byte.
//
// The package depends on nothing but the standard library and compiles for GOOS=wasip1, so a plugin
// links the same code the host runs. It does no I/O and keeps no global state.
package abi

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// The ABI version this package implements. A host refuses a plugin whose major version differs;
// a newer minor version only adds optional sections that older readers skip.
const (
	Major = 1
	Minor = 1
)

// Version packs a major and minor version the way the allocd_abi_version export returns it.
func Version(major, minor uint16) int32 { return int32(uint32(major)<<16 | uint32(minor)) }

// SplitVersion is the inverse of Version.
func SplitVersion(v int32) (major, minor uint16) { return uint16(uint32(v) >> 16), uint16(v) }

// Queue identifies one message queue, as RocketMQ's MessageQueue does.
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// String formats q exactly as RocketMQ's MessageQueue.toString does.
func (q Queue) String() string {
	return "MessageQueue [topic=" + q.Topic + ", brokerName=" + q.BrokerName + ", queueId=" + strconv.Itoa(int(q.QueueID)) + "]"
}

// CompareQueues orders queues as RocketMQ's MessageQueue.compareTo does: by topic, then broker
// name (both byte-wise, which equals Java's UTF-16 order for the ASCII names brokers use), then
// queue id numerically.
func CompareQueues(a, b Queue) int {
	// A topic's queues usually share their name strings: skip comparing bytes then.
	if !sameString(a.Topic, b.Topic) {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
	}
	if !sameString(a.BrokerName, b.BrokerName) {
		if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// Attrs are the optional attributes of one queue or one consumer: string labels (zone, instance
// id) and integer metrics (lag, weight). A nil map means none.
type Attrs struct {
	Labels  map[string]string `json:"labels,omitempty"`
	Metrics map[string]int64  `json:"metrics,omitempty"`
}

func (a Attrs) empty() bool { return len(a.Labels) == 0 && len(a.Metrics) == 0 }

// Request is one allocation request: compute, for every target consumer id, the queues of Queues
// that it owns. The host builds it; EncodeRequest writes it in the wire format.
type Request struct {
	// Group is the consumer group's name. RocketMQ's strategies use it only in log text.
	Group string
	// Targets are the consumer ids to compute for. Nil means the whole group: one result per
	// entry of Consumers, in that order. A target need not be in Consumers (RocketMQ then
	// answers an empty list).
	Targets []string
	// Queues is mqAll. The host passes it in canonical order (CompareQueues).
	Queues []Queue
	// Consumers is cidAll. The host passes it sorted byte-wise.
	Consumers []string
	// QueueAttrs is nil, or parallel to Queues.
	QueueAttrs []Attrs
	// ConsumerAttrs is nil, or parallel to Consumers.
	ConsumerAttrs []Attrs
	// PrevOwners is nil, or parallel to Queues: the consumer id that owned each queue in the
	// previous generation, "" for none.
	PrevOwners []string
	// Config is the binding's configuration (plugin settings such as "vnodes").
	Config map[string]string
	// QueuesFrozen promises that Queues (its array, and so its strings) is never modified once
	// the request has been encoded: an Encoder then keeps a reference to it instead of a copy
	// and recognises it again by its address, without comparing 40 bytes a queue. A client that
	// asks again about the same queues with other consumers (the rocketmq adapter's cache miss
	// on an unchanged mqAll) sets it on a slice it owns. It is not part of the encoding.
	QueuesFrozen bool
}

// NumTargets is the number of results a response to r must carry.
func (r *Request) NumTargets() int {
	if r.Targets == nil {
		return len(r.Consumers)
	}
	return len(r.Targets)
}

// Target returns the consumer id of result i.
func (r *Request) Target(i int) string {
	if r.Targets == nil {
		return r.Consumers[i]
	}
	return r.Targets[i]
}

// Result is the answer for one target: indices into the request's Queues in the plugin's order,
// or the plugin's error for that target.
type Result struct {
	Indices []int
	Err     string
	Failed  bool
}

// Response holds one Result per target of the request, in target order.
type Response struct {
	Results []Result
	// Owners is set (not nil) when the plugin answered in the owner form (ABI 1.1, ABI.md §5.4):
	// one entry per queue, the index in Consumers of its owner or NoOwner. DecodeResponse leaves
	// Results empty then; Validate checks Owners against the request and fills Results from it.
	Owners []int32
}

// Error is a problem with an encoded message or an answer, naming what was wrong.
type Error struct{ msg string }

func (e *Error) Error() string { return "abi: " + e.msg }

func errorf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }
