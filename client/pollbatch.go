package client

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Long-poll batching. The assignment long-polls of a Client's members travel together in POST
// /v1/assignments, up to maxPollBatch in a request, which the daemon answers as soon as one of
// them would be answered alone. Over HTTP/2 each held request is a stream that costs the
// daemon about 20 KiB of RSS (BENCHMARKS.md, "Polls that share a request"); a process of many
// members so holds one for many. A poll waits pollLinger for others to share its request: it
// misses nothing meanwhile, as it carries the generation its member last saw and is answered
// at once when that is old. The polls of a request that were not answered (304) go again,
// each with what is left of its own wait, so each PollAssignment answers as it would alone:
// on a change, or when its wait ends. A daemon without the endpoint (404) turns batching off
// for the Client; another refusal of a batch (400, 413) sends its polls alone; a 5xx, or no
// answer, is each poll's.

const (
	// maxPollBatch bounds the polls of one request (the daemon takes up to 1,000). A batch is
	// sent again whole after any of its polls is answered, so it is kept small.
	maxPollBatch = 64
	// pollLinger is how long a poll waits for others to share its request.
	pollLinger = 2 * time.Millisecond
)

// WithPollBatching turns long-poll batching on (the default) or off: off, every long-poll is a
// request of its own (GET /v1/groups/{group}/assignment).
func WithPollBatching(on bool) Option { return func(c *Client) { c.polls.off.Store(!on) } }

type pollBatcher struct {
	off       atomic.Bool // batching is off, or the daemon has no batch endpoint
	mu        sync.Mutex
	pending   []*pollCall
	scheduled bool // a send of pending is on its way
}

type pollCall struct {
	group, cid, topic string
	after             int64
	deadline          time.Time // the end of its wait
	a                 MemberAssignment
	err               error
	alone             bool // the batch was refused: send it on its own
	done              chan struct{}
	// Under the batcher's mu: abandoned when its caller stopped waiting; req the request
	// holding it.
	abandoned bool
	req       *pollRequest
}

// pollRequest is one batch on its way: cancelled once every caller of its polls is gone.
type pollRequest struct {
	live   int
	cancel context.CancelFunc
}

// path is the poll's own path, which its errors name.
func (p *pollCall) path() string { return "/v1/groups/" + seg(p.group) + "/assignment" }

// batchPoll sends a long-poll in a batch and waits for its answer; alone: the caller must send
// it on its own instead.
func (c *Client) batchPoll(ctx context.Context, group, cid, topic string, after int64, wait time.Duration) (a MemberAssignment, alone bool, err error) {
	call := &pollCall{group: group, cid: cid, topic: topic, after: max(after, 0), deadline: time.Now().Add(wait), done: make(chan struct{})}
	c.queuePolls(call)
	select {
	case <-call.done:
		return call.a, call.alone, call.err
	case <-ctx.Done():
		b := &c.polls
		b.mu.Lock()
		call.abandoned = true
		if r := call.req; r != nil {
			if r.live--; r.live == 0 {
				r.cancel()
			}
		}
		b.mu.Unlock()
		return MemberAssignment{}, false, fmt.Errorf("allocd: GET %s: %w", call.path(), ctx.Err())
	}
}

// queuePolls adds calls to the pending polls, and has them sent after pollLinger, or at once
// when a batch is full.
func (c *Client) queuePolls(calls ...*pollCall) {
	b := &c.polls
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, call := range calls {
		if !call.abandoned {
			b.pending = append(b.pending, call)
		}
	}
	switch {
	case len(b.pending) >= maxPollBatch:
		b.sendPendingLocked(c)
	case len(b.pending) > 0 && !b.scheduled:
		b.scheduled = true
		time.AfterFunc(pollLinger, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.scheduled = false
			b.sendPendingLocked(c)
		})
	}
}

// sendPendingLocked sends the pending polls, in batches of at most maxPollBatch.
func (b *pollBatcher) sendPendingLocked(c *Client) {
	live := b.pending[:0]
	for _, call := range b.pending {
		if !call.abandoned {
			live = append(live, call)
		}
	}
	clear(b.pending[len(live):])
	b.pending = live
	for len(b.pending) > 0 {
		n := min(len(b.pending), maxPollBatch)
		batch := b.pending[:n:n]
		b.pending = append([]*pollCall(nil), b.pending[n:]...)
		ctx, cancel := context.WithCancel(context.Background())
		r := &pollRequest{live: n, cancel: cancel}
		for _, call := range batch {
			call.req = r
		}
		go c.sendPollBatch(ctx, r, batch)
	}
}

type pollBatchRequest struct {
	Polls []pollItem `json:"polls"`
}

type pollItem struct {
	Group  string   `json:"group"`
	CID    string   `json:"cid"`
	Topics []string `json:"topics,omitempty"`
	After  int64    `json:"after"`
	Wait   string   `json:"wait"`
}

// sendPollBatch sends one batch and finishes each of its calls, or queues again those the
// daemon left waiting (304).
func (c *Client) sendPollBatch(ctx context.Context, r *pollRequest, batch []*pollCall) {
	defer r.cancel()
	now := time.Now()
	req := pollBatchRequest{Polls: make([]pollItem, len(batch))}
	var longest time.Duration
	for i, call := range batch {
		wait := max(call.deadline.Sub(now), 0)
		longest = max(longest, wait)
		req.Polls[i] = pollItem{Group: call.group, CID: call.cid, After: call.after, Wait: wait.String()}
		if call.topic != "" {
			req.Polls[i].Topics = []string{call.topic}
		}
	}
	reply := c.postBatch(ctx, "/v1/assignments", req, len(batch), longest+c.timeout)
	b := &c.polls
	if reply.notFound {
		b.off.Store(true) // a daemon from before poll batches
	}
	var again []*pollCall
	b.mu.Lock()
	for i, call := range batch {
		call.req = nil
		switch {
		case reply.alone:
			call.alone = true
		case reply.answers == nil:
			call.err = reply.itemErr("GET", call.path())
		case reply.answers[i].Status == http.StatusNotModified:
			again = append(again, call)
			continue
		default:
			call.a, call.err, call.alone = reply.answers[i].result("GET", call.path())
		}
		close(call.done)
	}
	b.mu.Unlock()
	if len(again) > 0 {
		c.queuePolls(again...)
	}
}
