package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Heartbeat batching. The heartbeats that a Client's members send at the same moment travel
// in one POST /v1/heartbeats, which the daemon answers heartbeat by heartbeat as it would
// answer each alone: over HTTP/2 the request itself, not the heartbeat, was 86 % of the
// daemon's instructions (BENCHMARKS.md, "Heartbeats that share a request"). Nothing waits to
// fill a batch: a heartbeat goes at once when fewer than maxBatchesInFlight batches are on
// their way, and otherwise with the next one, so a lone member's heartbeat is one request as
// before and only those sent while others are in flight share one. A daemon without the
// endpoint (404) turns batching off for the Client; another refusal of a batch (400, 413)
// sends its heartbeats alone, so each gets the answer or error it would have had; a 5xx, or
// no answer, is each heartbeat's.

const (
	maxBatchesInFlight = 4
	// maxBatch bounds the heartbeats of one request (the daemon takes up to 1,000). Each waits
	// for its whole batch, so a batch is kept small: 64 rather than 256 brought a 20,000-member
	// fleet's p99 at the daemon from 20-100 ms to 5-10 ms (RATIONALE.md, "Why the Go client's
	// heartbeat batches hold at most 64 heartbeats").
	maxBatch = 64
)

// WithHeartbeatBatching turns heartbeat batching on (the default) or off: off, every
// heartbeat is a request of its own.
func WithHeartbeatBatching(on bool) Option { return func(c *Client) { c.batch.off.Store(!on) } }

type batcher struct {
	off      atomic.Bool // batching is off, or the daemon has no batch endpoint
	mu       sync.Mutex
	pending  []*batchCall
	inFlight int
}

type batchCall struct {
	group string
	hb    Heartbeat
	a     MemberAssignment
	err   error
	alone bool // the batch was refused: send it on its own
	done  chan struct{}
}

// path is the heartbeat's own path, which its errors name.
func (b *batchCall) path() string { return "/v1/groups/" + seg(b.group) + "/heartbeat" }

func (b *batchCall) finish() { close(b.done) }

// batchHeartbeat sends hb in a batch and waits for its answer; alone: the caller must send it
// on its own instead.
func (c *Client) batchHeartbeat(ctx context.Context, group string, hb Heartbeat) (a MemberAssignment, alone bool, err error) {
	call := &batchCall{group: group, hb: hb, done: make(chan struct{})}
	b := &c.batch
	b.mu.Lock()
	b.pending = append(b.pending, call)
	send := b.inFlight < maxBatchesInFlight
	if send {
		b.inFlight++
	}
	b.mu.Unlock()
	if send {
		go c.sendBatches() // not on this goroutine: ctx would not end the wait
	}
	select {
	case <-call.done:
		return call.a, call.alone, call.err
	case <-ctx.Done():
		return MemberAssignment{}, false, fmt.Errorf("allocd: POST %s: %w", call.path(), ctx.Err())
	}
}

// sendBatches sends the pending heartbeats, a batch at a time, holding one of the
// maxBatchesInFlight places until none is left.
func (c *Client) sendBatches() {
	b := &c.batch
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), maxBatch)
		batch := b.pending[:n:n]
		b.pending = append([]*batchCall(nil), b.pending[n:]...)
		b.mu.Unlock()
		c.sendBatch(batch)
	}
}

type batchRequest struct {
	Heartbeats []batchItem `json:"heartbeats"`
}

type batchItem struct {
	Group     string    `json:"group"`
	Heartbeat Heartbeat `json:"heartbeat"`
}

// batchResult is one item's answer within a batch: what its own request would have answered.
type batchResult struct {
	Status int               `json:"status"`
	Answer *MemberAssignment `json:"answer"`
	Error  string            `json:"error"`
}

// result is the item's assignment, or its error as its own request at method and path would
// have had it; alone: an answer the client does not read, so the item goes on its own.
func (r batchResult) result(method, path string) (a MemberAssignment, err error, alone bool) {
	switch {
	case r.Status == http.StatusOK && r.Answer != nil:
		return *r.Answer, nil, false
	case r.Status >= 300:
		return a, &Error{Method: method, Path: path, StatusCode: r.Status, Message: r.Error}, false
	}
	return a, nil, true
}

// batchReply is what a batch request came to: the items' answers, in order; or no answer (err)
// or a 5xx (status, body), which each item would have had alone; or notFound, a daemon without
// the endpoint; or refused, a batch the daemon or the client could not take, whose items go alone.
type batchReply struct {
	answers         []batchResult
	err             error
	status          int
	body            []byte
	notFound, alone bool
}

// itemErr is the error of an item whose batch got no answers: its own request's, at method and
// path, as the batch's was.
func (r *batchReply) itemErr(method, path string) error {
	if r.err != nil {
		return r.err
	}
	return answerError(method, path, r.status, r.body)
}

// postBatch sends req, a batch of n items, to path and reads its reply.
func (c *Client) postBatch(ctx context.Context, path string, req any, n int, timeout time.Duration) batchReply {
	body, err := json.Marshal(req)
	if err != nil {
		return batchReply{alone: true}
	}
	header := http.Header{"Accept": {"application/json"}, "Content-Type": {"application/json"}}
	resp, err := c.send(ctx, "POST", path, nil, body, header, timeout)
	if err != nil {
		return batchReply{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	var ans struct {
		Answers []batchResult `json:"answers"`
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return batchReply{notFound: true, alone: true}
	case err == nil && resp.StatusCode >= 500:
		// The daemon cannot serve (no leader, shutting down, failing): each item would have
		// had this answer alone.
		return batchReply{status: resp.StatusCode, body: data}
	case err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(data, &ans) != nil || len(ans.Answers) != n:
		return batchReply{alone: true}
	}
	return batchReply{answers: ans.Answers}
}

// sendBatch sends one batch and finishes each of its calls.
func (c *Client) sendBatch(batch []*batchCall) {
	req := batchRequest{Heartbeats: make([]batchItem, len(batch))}
	for i, call := range batch {
		req.Heartbeats[i] = batchItem{call.group, call.hb}
	}
	r := c.postBatch(context.Background(), "/v1/heartbeats", req, len(batch), c.timeout)
	if r.notFound {
		c.batch.off.Store(true) // a daemon from before batches
	}
	for i, call := range batch {
		switch {
		case r.alone:
			call.alone = true
		case r.answers == nil:
			call.err = r.itemErr("POST", call.path())
		default:
			call.a, call.err, call.alone = r.answers[i].result("POST", call.path())
		}
		call.finish()
	}
}
