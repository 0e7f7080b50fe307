package lock

import (
	"cmp"
	"strconv"
	"time"
)

// Queue names one message queue of a topic, as RocketMQ's MessageQueue does.
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// String formats q as topic/brokerName/queueId, for example "T/b/0".
func (q Queue) String() string {
	return q.Topic + "/" + q.BrokerName + "/" + strconv.Itoa(q.QueueID)
}

func (q Queue) validate() error {
	switch {
	case q.Topic == "":
		return &ArgError{Arg: "queue", Value: q.String(), Problem: "topic is empty"}
	case q.QueueID < 0:
		return &ArgError{Arg: "queue", Value: q.String(), Problem: "queueId " + strconv.Itoa(q.QueueID) + " is negative"}
	}
	return nil
}

func compareQueues(a, b Queue) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := cmp.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

// MessageGroup names one message group of a topic: the messages a producer
// tagged with the same group, which must be consumed one at a time, in order.
type MessageGroup struct {
	Topic string `json:"topic"`
	Name  string `json:"messageGroup"`
}

// String formats g as topic/name, for example "T/order-42".
func (g MessageGroup) String() string { return g.Topic + "/" + g.Name }

func (g MessageGroup) validate() error {
	switch {
	case g.Topic == "":
		return &ArgError{Arg: "message group", Value: g.String(), Problem: "topic is empty"}
	case g.Name == "":
		return &ArgError{Arg: "message group", Value: g.String(), Problem: "name is empty"}
	}
	return nil
}

func compareMessageGroups(a, b MessageGroup) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Kind is how an orderly group delivers, and so which locks it uses.
type Kind uint8

const (
	// KindQueue is queue-based delivery: each queue is consumed by the member
	// the group's generation assigns it to, which must hold the queue's lock.
	KindQueue Kind = iota + 1
	// KindMessageGroup is message-based delivery: any live member may consume
	// a message group while it holds that group's lock.
	KindMessageGroup
)

func (k Kind) valid() bool { return k == KindQueue || k == KindMessageGroup }

// String returns "queue", "messageGroup", or "Kind(n)" for an unknown kind.
func (k Kind) String() string {
	switch k {
	case KindQueue:
		return "queue"
	case KindMessageGroup:
		return "messageGroup"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its String form; it refuses an unknown kind.
func (k Kind) MarshalText() ([]byte, error) {
	if !k.valid() {
		return nil, &ArgError{Arg: "kind", Value: k.String(), Problem: "unknown kind"}
	}
	return []byte(k.String()), nil
}

// UnmarshalText decodes "queue" or "messageGroup".
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "queue":
		*k = KindQueue
	case "messageGroup":
		*k = KindMessageGroup
	default:
		return &ArgError{Arg: "kind", Value: strconv.Quote(string(b)), Problem: `unknown kind (want "queue" or "messageGroup")`}
	}
	return nil
}

// Lock names one lock within a group: a queue lock (Kind KindQueue, Queue set)
// or a message-group lock (Kind KindMessageGroup, MessageGroup set). Build it
// with QueueLock or MessageGroupLock. Lock is comparable.
type Lock struct {
	Kind         Kind         `json:"kind"`
	Queue        Queue        `json:"queue,omitzero"`
	MessageGroup MessageGroup `json:"messageGroup,omitzero"`
}

// QueueLock returns the name of q's lock.
func QueueLock(q Queue) Lock { return Lock{Kind: KindQueue, Queue: q} }

// MessageGroupLock returns the name of g's lock.
func MessageGroupLock(g MessageGroup) Lock { return Lock{Kind: KindMessageGroup, MessageGroup: g} }

// String returns, for example, "queue T/b/0" or "message group T/order-42".
func (l Lock) String() string {
	switch l.Kind {
	case KindQueue:
		return "queue " + l.Queue.String()
	case KindMessageGroup:
		return "message group " + l.MessageGroup.String()
	}
	return "lock of " + l.Kind.String()
}

// validate checks l the way the lock calls check their arguments, so that a
// restored snapshot and a Check obey the same rules as a grant.
func (l Lock) validate() error {
	switch l.Kind {
	case KindQueue:
		if l.MessageGroup != (MessageGroup{}) {
			return &ArgError{Arg: "lock", Value: l.String(), Problem: "a queue lock names no message group"}
		}
		return l.Queue.validate()
	case KindMessageGroup:
		if l.Queue != (Queue{}) {
			return &ArgError{Arg: "lock", Value: l.String(), Problem: "a message-group lock names no queue"}
		}
		return l.MessageGroup.validate()
	}
	return &ArgError{Arg: "lock kind", Value: l.Kind.String(), Problem: "unknown kind (want queue or messageGroup)"}
}

func compareLocks(a, b Lock) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if a.Kind == KindQueue {
		return compareQueues(a.Queue, b.Queue)
	}
	return compareMessageGroups(a.MessageGroup, b.MessageGroup)
}

// Grant is a lock given to (or renewed for) the caller.
type Grant struct {
	Lock Lock
	// Token is the fencing token: larger than every token ever issued
	// before it, kept by renewals. Pass it to whatever the holder writes
	// to (an offset store, a broker) so that Check can refuse it once the
	// lock has moved on.
	Token uint64
	// Expires is when the lease ends unless renewed. The lease is valid
	// while now < Expires.
	Expires time.Time
	// Renewed reports that the call extended the caller's live grant. When
	// false the grant is new, and the holder should start from the
	// committed offset rather than from anything it had in hand: someone
	// else may have held the lock in between.
	Renewed bool
	// Attempt is, for a message group, the delivery attempt of its head
	// message that this grant is for: 1 on the first, one more after each
	// failed attempt (release with Retry, lease expiry, member gone). It is
	// 0 for a queue lock.
	Attempt int
	// DeadLetter reports that the head message has already failed the
	// group's MaxAttempts attempts: the holder should move it to the
	// dead-letter queue instead of processing it, then release with Done.
	DeadLetter bool
}

// Reason says why a lock call was refused.
type Reason string

const (
	// ReasonHeld: another member holds the lock. Ask again after
	// RetryAfter; the lock frees when the holder releases it, its lease
	// ends, or it leaves the group.
	ReasonHeld Reason = "held"
	// ReasonNotOwner: the current generation assigns the queue to Owner
	// (or, if Owner is empty, to nobody). Asking again helps only after a
	// rebalance. A holder gets this when it tries to renew a queue that was
	// moved away from it: its lease still runs to its end, and it should
	// finish the message in hand and unlock.
	ReasonNotOwner Reason = "not-owner"
	// ReasonReserved: the message group is free but kept for Owner, the
	// live member the group's plugin prefers, which asked for it within
	// Config.Patience. Ask again after RetryAfter.
	ReasonReserved Reason = "reserved"
)

// Refusal is a lock call that did not grant.
type Refusal struct {
	Lock Lock
	// Holder holds the lock now; empty when it is free. It is the caller
	// itself when a holder's renewal is refused with ReasonNotOwner.
	Holder string
	Reason Reason
	// Owner is the member the lock is meant for: the queue's assigned
	// owner (ReasonNotOwner) or the preferred member the message group is
	// kept for (ReasonReserved). Empty otherwise.
	Owner string
	// RetryAfter is how long to wait before asking again; zero when only a
	// rebalance can change the answer.
	RetryAfter time.Duration
}

// Lease describes a held lock, as reported by Leases, Tick and MemberGone.
type Lease struct {
	Group   string
	Lock    Lock
	Holder  string
	Token   uint64
	Expires time.Time
	// Attempt is as in Grant.
	Attempt int
}

// Outcome is how the holder of a message group ends its attempt.
type Outcome uint8

const (
	// Done: the head message was processed (or dead-lettered); the attempt
	// count starts again from zero.
	Done Outcome = iota + 1
	// Retry: the attempt failed; it counts towards MaxAttempts.
	Retry
)

// String returns "done", "retry", or "Outcome(n)".
func (o Outcome) String() string {
	switch o {
	case Done:
		return "done"
	case Retry:
		return "retry"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText encodes o as its String form; it refuses an unknown outcome.
func (o Outcome) MarshalText() ([]byte, error) {
	if o != Done && o != Retry {
		return nil, &ArgError{Arg: "outcome", Value: o.String(), Problem: "unknown outcome"}
	}
	return []byte(o.String()), nil
}

// UnmarshalText decodes "done" or "retry".
func (o *Outcome) UnmarshalText(b []byte) error {
	switch string(b) {
	case "done":
		*o = Done
	case "retry":
		*o = Retry
	default:
		return &ArgError{Arg: "outcome", Value: strconv.Quote(string(b)), Problem: `unknown outcome (want "done" or "retry")`}
	}
	return nil
}

// GroupConfig is what the lock core needs to know about an orderly group.
type GroupConfig struct {
	Kind Kind
	// MaxAttempts is how many delivery attempts a message group's head
	// message gets before grants report DeadLetter. Zero means
	// DefaultMaxAttempts.
	MaxAttempts int
}

func (c GroupConfig) maxAttempts() int {
	if c.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return c.MaxAttempts
}
