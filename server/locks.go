package server

import (
	"io"
	"math"
	"net/http"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/lock"
)

// The lock API of orderly groups (issue 6):
//
//	POST /v1/groups/{group}/locks/queues          {"cid":"c1","queues":[{"topic":"T","brokerName":"b","queueId":0}],"lease":"60s"}
//	POST /v1/groups/{group}/unlock/queues         {"cid":"c1","queues":[...]}
//	POST /v1/groups/{group}/locks/message-groups  {"cid":"c1","topic":"T","messageGroup":"order-42","lease":"60s"}
//	POST /v1/groups/{group}/release/message-groups {"cid":"c1","topic":"T","messageGroup":"order-42","token":9,"outcome":"done"}
//	POST /v1/groups/{group}/locks/check           {"topic":"T","queue":{...}} or {"topic":"T","messageGroup":"..."}, and "token":9
//	GET  /v1/groups/{group}/locks                 the live leases
//
// A refusal is an answer, not an error: the lock is held by another member, the queue is
// assigned to another member, or the message group is kept for the member the plugin prefers.
// Errors: 400 a malformed value or a lease outside [10s, 12h], 404 an unknown group or a caller
// that is not a live member, 409 a group that is not orderly or takes the other kind of lock, and
// a release with a token that no longer holds the lock.

// maxLockQueues bounds the queues of one lock call.
const maxLockQueues = 4096

type lockQueuesRequest struct {
	CID    string      `json:"cid"`
	Queues []abi.Queue `json:"queues"`
	Lease  string      `json:"lease"`
}

type lockedQueue struct {
	Queue   abi.Queue `json:"queue"`
	Token   uint64    `json:"token"`
	Expires time.Time `json:"expires"`
	// Renewed: the caller already held the queue; the token is unchanged.
	Renewed bool `json:"renewed"`
}

type refusedQueue struct {
	Queue  abi.Queue `json:"queue"`
	Holder string    `json:"holder"`
	// Reason is "held" (another member's lease is live) or "not-owner" (the generation in
	// force assigns the queue to Owner; "" for nobody).
	Reason     string `json:"reason"`
	Owner      string `json:"owner,omitempty"`
	RetryAfter string `json:"retryAfter,omitempty"`
}

type lockQueuesResponse struct {
	Locked  []lockedQueue  `json:"locked"`
	Refused []refusedQueue `json:"refused"`
}

type unlockQueuesRequest struct {
	CID    string      `json:"cid"`
	Queues []abi.Queue `json:"queues"`
}

type lockMessageGroupRequest struct {
	CID          string `json:"cid"`
	Topic        string `json:"topic"`
	MessageGroup string `json:"messageGroup"`
	Lease        string `json:"lease"`
}

type messageGroupGranted struct {
	Granted bool      `json:"granted"`
	Token   uint64    `json:"token"`
	Attempt int       `json:"attempt"`
	Expires time.Time `json:"expires"`
	Renewed bool      `json:"renewed"`
	// DeadLetter: the head message has failed maxAttempts times; move it to the dead-letter
	// queue, then release with "done".
	DeadLetter bool `json:"deadLetter"`
}

type messageGroupRefused struct {
	Granted bool   `json:"granted"`
	Holder  string `json:"holder"`
	// Reason is "held" or "reserved" (free, but kept for Owner, the member the plugin prefers,
	// which asked for it).
	Reason     string `json:"reason"`
	Owner      string `json:"owner,omitempty"`
	RetryAfter string `json:"retryAfter"`
}

type releaseMessageGroupRequest struct {
	CID          string `json:"cid"`
	Topic        string `json:"topic"`
	MessageGroup string `json:"messageGroup"`
	Token        uint64 `json:"token"`
	Outcome      string `json:"outcome"`
}

type checkLockRequest struct {
	Topic        string     `json:"topic"`
	Queue        *abi.Queue `json:"queue"`
	MessageGroup string     `json:"messageGroup"`
	Token        uint64     `json:"token"`
}

type leaseJSON struct {
	Lock    lock.Lock `json:"lock"`
	Holder  string    `json:"holder"`
	Token   uint64    `json:"token"`
	Expires time.Time `json:"expires"`
	Attempt int       `json:"attempt,omitempty"`
}

func (s *Server) lockQueues(w http.ResponseWriter, r *http.Request) error {
	group, err := groupOf(r)
	if err != nil {
		return err
	}
	req, err := decodeLockQueues(r.Body)
	if err != nil {
		return err
	}
	locked, refused, err := s.c.LockQueues(group, req.cid, req.queues, req.lease)
	if err != nil {
		return err
	}
	resp := lockQueuesResponse{Locked: make([]lockedQueue, len(locked)), Refused: make([]refusedQueue, len(refused))}
	for i, g := range locked {
		resp.Locked[i] = lockedQueue{Queue: abiQueue(g.Lock.Queue), Token: g.Token, Expires: g.Expires, Renewed: g.Renewed}
	}
	for i, f := range refused {
		resp.Refused[i] = refusedQueue{Queue: abiQueue(f.Lock.Queue), Holder: f.Holder, Reason: string(f.Reason), Owner: f.Owner, RetryAfter: durationText(f.RetryAfter)}
	}
	return writeJSON(w, http.StatusOK, resp)
}

func (s *Server) unlockQueues(w http.ResponseWriter, r *http.Request) error {
	group, err := groupOf(r)
	if err != nil {
		return err
	}
	req, err := decodeUnlockQueues(r.Body)
	if err != nil {
		return err
	}
	unlocked, err := s.c.UnlockQueues(group, req.cid, req.queues)
	if err != nil {
		return err
	}
	out := make([]abi.Queue, len(unlocked))
	for i, q := range unlocked {
		out[i] = abiQueue(q)
	}
	return writeJSON(w, http.StatusOK, struct {
		Unlocked []abi.Queue `json:"unlocked"`
	}{out})
}

func (s *Server) lockMessageGroup(w http.ResponseWriter, r *http.Request) error {
	group, err := groupOf(r)
	if err != nil {
		return err
	}
	req, err := decodeLockMessageGroup(r.Body)
	if err != nil {
		return err
	}
	g, refusal, err := s.c.LockMessageGroup(group, req.cid, req.mg, req.lease)
	if err != nil {
		return err
	}
	if refusal != nil {
		return writeJSON(w, http.StatusOK, messageGroupRefused{
			Holder: refusal.Holder, Reason: string(refusal.Reason), Owner: refusal.Owner, RetryAfter: refusal.RetryAfter.String(),
		})
	}
	return writeJSON(w, http.StatusOK, messageGroupGranted{
		Granted: true, Token: g.Token, Attempt: g.Attempt, Expires: g.Expires, Renewed: g.Renewed, DeadLetter: g.DeadLetter,
	})
}

func (s *Server) releaseMessageGroup(w http.ResponseWriter, r *http.Request) error {
	group, err := groupOf(r)
	if err != nil {
		return err
	}
	req, err := decodeRelease(r.Body)
	if err != nil {
		return err
	}
	if err := s.c.ReleaseMessageGroup(group, req.cid, req.mg, req.token, req.outcome); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, struct {
		Released bool `json:"released"`
	}{true})
}

func (s *Server) checkLock(w http.ResponseWriter, r *http.Request) error {
	group, err := groupOf(r)
	if err != nil {
		return err
	}
	req, err := decodeCheck(r.Body)
	if err != nil {
		return err
	}
	res, err := s.c.CheckLock(group, req.lock, req.token)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) error {
	leases, err := s.c.Leases(r.PathValue("group"))
	if err != nil {
		return err
	}
	out := make([]leaseJSON, len(leases))
	for i, l := range leases {
		out[i] = leaseJSON{Lock: l.Lock, Holder: l.Holder, Token: l.Token, Expires: l.Expires, Attempt: l.Attempt}
	}
	return writeJSON(w, http.StatusOK, struct {
		Locks []leaseJSON `json:"locks"`
	}{out})
}

// lockCall is a decoded and checked lock request (the fields its route uses).
type lockCall struct {
	cid     string
	queues  []lock.Queue
	mg      lock.MessageGroup
	lease   time.Duration
	token   uint64
	outcome lock.Outcome
	lock    lock.Lock
}

func decodeLockQueues(r io.Reader) (lockCall, error) {
	var req lockQueuesRequest
	if err := decode(r, &req); err != nil {
		return lockCall{}, err
	}
	c := lockCall{cid: req.CID}
	var err error
	if err = coordinator.CheckID("cid", req.CID); err == nil {
		if c.queues, err = lockQueueList(req.Queues); err == nil {
			c.lease, err = parseLease(req.Lease)
		}
	}
	return c, err
}

func decodeUnlockQueues(r io.Reader) (lockCall, error) {
	var req unlockQueuesRequest
	if err := decode(r, &req); err != nil {
		return lockCall{}, err
	}
	c := lockCall{cid: req.CID}
	err := coordinator.CheckID("cid", req.CID)
	if err == nil {
		c.queues, err = lockQueueList(req.Queues)
	}
	return c, err
}

func decodeLockMessageGroup(r io.Reader) (lockCall, error) {
	var req lockMessageGroupRequest
	if err := decode(r, &req); err != nil {
		return lockCall{}, err
	}
	c := lockCall{cid: req.CID}
	var err error
	if err = coordinator.CheckID("cid", req.CID); err == nil {
		if c.mg, err = messageGroupOf(req.Topic, req.MessageGroup); err == nil {
			c.lease, err = parseLease(req.Lease)
		}
	}
	return c, err
}

func decodeRelease(r io.Reader) (lockCall, error) {
	var req releaseMessageGroupRequest
	if err := decode(r, &req); err != nil {
		return lockCall{}, err
	}
	c := lockCall{cid: req.CID, token: req.Token}
	if err := coordinator.CheckID("cid", req.CID); err != nil {
		return c, err
	}
	var err error
	if c.mg, err = messageGroupOf(req.Topic, req.MessageGroup); err != nil {
		return c, err
	}
	if req.Token == 0 {
		return c, badRequest("token is required: the token of the grant being released")
	}
	if err := c.outcome.UnmarshalText([]byte(req.Outcome)); err != nil {
		return c, badRequest("outcome %q: want \"done\" (processed or dead-lettered) or \"retry\" (failed)", req.Outcome)
	}
	return c, nil
}

func decodeCheck(r io.Reader) (lockCall, error) {
	var req checkLockRequest
	if err := decode(r, &req); err != nil {
		return lockCall{}, err
	}
	c := lockCall{token: req.Token}
	switch {
	case req.Queue != nil && req.MessageGroup != "":
		return c, badRequest("give either queue or messageGroup, not both")
	case req.Queue != nil:
		if req.Topic != "" && req.Topic != req.Queue.Topic {
			return c, badRequest("topic %q differs from the queue's topic %q", req.Topic, req.Queue.Topic)
		}
		qs, err := lockQueueList([]abi.Queue{*req.Queue})
		if err != nil {
			return c, err
		}
		c.lock = lock.QueueLock(qs[0])
	case req.MessageGroup != "":
		mg, err := messageGroupOf(req.Topic, req.MessageGroup)
		if err != nil {
			return c, err
		}
		c.lock = lock.MessageGroupLock(mg)
	default:
		return c, badRequest("give the lock to check: queue, or topic and messageGroup")
	}
	return c, nil
}

func groupOf(r *http.Request) (string, error) {
	group := r.PathValue("group")
	return group, coordinator.CheckName("group", group)
}

// lockQueueList checks queues the way topics name them and converts them for the lock table.
func lockQueueList(qs []abi.Queue) ([]lock.Queue, error) {
	if len(qs) == 0 {
		return nil, badRequest("queues is empty")
	}
	if len(qs) > maxLockQueues {
		return nil, badRequest("%d queues in one call, more than %d", len(qs), maxLockQueues)
	}
	out := make([]lock.Queue, len(qs))
	for i, q := range qs {
		if err := coordinator.CheckName("topic", q.Topic); err != nil {
			return nil, err
		}
		if err := coordinator.CheckID("brokerName", q.BrokerName); err != nil {
			return nil, err
		}
		if q.QueueID < 0 {
			return nil, badRequest("queue %s: queueId %d is negative", q, q.QueueID)
		}
		out[i] = lock.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int(q.QueueID)}
	}
	return out, nil
}

func messageGroupOf(topic, name string) (lock.MessageGroup, error) {
	if err := coordinator.CheckName("topic", topic); err != nil {
		return lock.MessageGroup{}, err
	}
	if err := coordinator.CheckMessageGroup(name); err != nil {
		return lock.MessageGroup{}, err
	}
	return lock.MessageGroup{Topic: topic, Name: name}, nil
}

func abiQueue(q lock.Queue) abi.Queue {
	return abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(min(q.QueueID, math.MaxInt32))}
}

// parseLease reads a lease as a Go duration ("60s", "1m30s"); "" means the default (60 s). The
// lock table checks the range.
func parseLease(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badRequest("lease %q is not a positive duration such as \"60s\"", s)
	}
	return d, nil
}

func durationText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}
