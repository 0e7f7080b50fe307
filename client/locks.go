package client

import (
	"context"
	"encoding/json"
	"time"
)

// The lock calls of orderly groups (a group bound with "orderly": true): queue locks for queue
// delivery, message-group locks for message delivery. Ordered wraps them for a consumer; these
// are the plain calls, for brokers and offset stores that check tokens, and for tests.

// QueueLock is a queue lock granted (or renewed) to the caller.
type QueueLock struct {
	Queue Queue `json:"queue"`
	// Token is the fencing token: larger than every token granted before it, kept by
	// renewals. Pass it with every write made on the lock's behalf so the store can check it.
	Token uint64 `json:"token"`
	// Expires is when the lease ends unless renewed, on the daemon's clock.
	Expires time.Time `json:"expires"`
	// Renewed reports that the caller already held the queue. When false the grant is new:
	// start from the committed offset, as someone else may have held the queue meanwhile.
	Renewed bool `json:"renewed"`
}

// Refusal reasons.
const (
	// ReasonHeld: another member holds the lock; ask again after RetryAfter.
	ReasonHeld = "held"
	// ReasonNotOwner: the generation in force assigns the queue to Owner ("" for nobody).
	// Asking again helps only after a rebalance. The holder of a queue moved away gets it on
	// renewal: its lease runs to its end; finish the message in hand and unlock.
	ReasonNotOwner = "not-owner"
	// ReasonReserved: the message group is free, but kept for Owner, the member the group's
	// plugin prefers, which is asking for it too. Ask again after RetryAfter.
	ReasonReserved = "reserved"
)

// QueueRefusal is a queue that was not granted.
type QueueRefusal struct {
	Queue Queue
	// Holder holds the queue now ("" when free; the caller itself when its renewal of a queue
	// moved away is refused).
	Holder     string
	Reason     string
	Owner      string
	RetryAfter time.Duration
}

// LockQueues takes or renews the locks of queues of a queue-based orderly group for member cid,
// for lease (0: the daemon's default, 60 s; 10 s to 12 h).
func (c *Client) LockQueues(ctx context.Context, group, cid string, queues []Queue, lease time.Duration) ([]QueueLock, []QueueRefusal, error) {
	var r struct {
		Locked  []QueueLock `json:"locked"`
		Refused []struct {
			Queue      Queue    `json:"queue"`
			Holder     string   `json:"holder"`
			Reason     string   `json:"reason"`
			Owner      string   `json:"owner"`
			RetryAfter duration `json:"retryAfter"`
		} `json:"refused"`
	}
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/locks/queues", nil, struct {
		CID    string  `json:"cid"`
		Queues []Queue `json:"queues"`
		Lease  string  `json:"lease,omitempty"`
	}{cid, queues, leaseText(lease)}, &r, 0)
	if err != nil {
		return nil, nil, err
	}
	refused := make([]QueueRefusal, len(r.Refused))
	for i, f := range r.Refused {
		refused[i] = QueueRefusal{Queue: f.Queue, Holder: f.Holder, Reason: f.Reason, Owner: f.Owner, RetryAfter: time.Duration(f.RetryAfter)}
	}
	return r.Locked, refused, nil
}

// UnlockQueues releases those of queues that cid holds, and returns them.
func (c *Client) UnlockQueues(ctx context.Context, group, cid string, queues []Queue) ([]Queue, error) {
	var r struct {
		Unlocked []Queue `json:"unlocked"`
	}
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/unlock/queues", nil, struct {
		CID    string  `json:"cid"`
		Queues []Queue `json:"queues"`
	}{cid, queues}, &r, 0)
	return r.Unlocked, err
}

// MessageGroupLock is the answer to a message-group lock call: granted, or refused.
type MessageGroupLock struct {
	Topic        string
	MessageGroup string
	Granted      bool
	// Token, Attempt, Expires, Renewed and DeadLetter describe a grant. Attempt is the
	// delivery attempt of the group's head message (1 first); DeadLetter reports that it has
	// failed the group's maxAttempts already: move it to the dead-letter queue, then release
	// with Done.
	Token      uint64
	Attempt    int
	Expires    time.Time
	Renewed    bool
	DeadLetter bool
	// Holder, Reason, Owner and RetryAfter describe a refusal.
	Holder     string
	Reason     string
	Owner      string
	RetryAfter time.Duration
}

// LockMessageGroup takes or renews the lock of one message group of a message-based orderly
// group for member cid, for lease (0: the daemon's default, 60 s; 10 s to 12 h).
func (c *Client) LockMessageGroup(ctx context.Context, group, cid, topic, messageGroup string, lease time.Duration) (MessageGroupLock, error) {
	var r struct {
		Granted    bool      `json:"granted"`
		Token      uint64    `json:"token"`
		Attempt    int       `json:"attempt"`
		Expires    time.Time `json:"expires"`
		Renewed    bool      `json:"renewed"`
		DeadLetter bool      `json:"deadLetter"`
		Holder     string    `json:"holder"`
		Reason     string    `json:"reason"`
		Owner      string    `json:"owner"`
		RetryAfter duration  `json:"retryAfter"`
	}
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/locks/message-groups", nil, struct {
		CID          string `json:"cid"`
		Topic        string `json:"topic"`
		MessageGroup string `json:"messageGroup"`
		Lease        string `json:"lease,omitempty"`
	}{cid, topic, messageGroup, leaseText(lease)}, &r, 0)
	return MessageGroupLock{
		Topic: topic, MessageGroup: messageGroup, Granted: r.Granted,
		Token: r.Token, Attempt: r.Attempt, Expires: r.Expires, Renewed: r.Renewed, DeadLetter: r.DeadLetter,
		Holder: r.Holder, Reason: r.Reason, Owner: r.Owner, RetryAfter: time.Duration(r.RetryAfter),
	}, err
}

// Outcome is how the holder of a message group ends its attempt.
type Outcome string

const (
	// Done: the head message was processed (or dead-lettered); the attempt count restarts.
	Done Outcome = "done"
	// Retry: the attempt failed; it counts towards maxAttempts.
	Retry Outcome = "retry"
)

// ReleaseMessageGroup ends cid's hold on a message group. A token that no longer holds the lock
// is refused with the daemon's 409 (IsConflict).
func (c *Client) ReleaseMessageGroup(ctx context.Context, group, cid, topic, messageGroup string, token uint64, outcome Outcome) error {
	return c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/release/message-groups", nil, struct {
		CID          string  `json:"cid"`
		Topic        string  `json:"topic"`
		MessageGroup string  `json:"messageGroup"`
		Token        uint64  `json:"token"`
		Outcome      Outcome `json:"outcome"`
	}{cid, topic, messageGroup, token, outcome}, nil, 0)
}

// LockCheck tells whether a token still holds its lock.
type LockCheck struct {
	Valid bool `json:"valid"`
	// Holder is, when the token is not valid, the member holding the lock now ("" if free).
	Holder string `json:"holder"`
}

// CheckQueueLock reports whether token still holds queue q's lock in group: what a broker or an
// offset store asks before accepting a holder's commit.
func (c *Client) CheckQueueLock(ctx context.Context, group string, q Queue, token uint64) (LockCheck, error) {
	var r LockCheck
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/locks/check", nil, struct {
		Queue Queue  `json:"queue"`
		Token uint64 `json:"token"`
	}{q, token}, &r, 0)
	return r, err
}

// CheckMessageGroupLock reports whether token still holds a message group's lock in group.
func (c *Client) CheckMessageGroupLock(ctx context.Context, group, topic, messageGroup string, token uint64) (LockCheck, error) {
	var r LockCheck
	err := c.do(ctx, "POST", "/v1/groups/"+seg(group)+"/locks/check", nil, struct {
		Topic        string `json:"topic"`
		MessageGroup string `json:"messageGroup"`
		Token        uint64 `json:"token"`
	}{topic, messageGroup, token}, &r, 0)
	return r, err
}

func leaseText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

// duration decodes the daemon's duration strings ("2.5s").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}
