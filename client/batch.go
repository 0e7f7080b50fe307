package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
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

type batchAnswer struct {
	Answers []struct {
		Status int               `json:"status"`
		Answer *MemberAssignment `json:"answer"`
		Error  string            `json:"error"`
	} `json:"answers"`
}

// sendBatch sends one batch and finishes each of its calls.
func (c *Client) sendBatch(batch []*batchCall) {
	req := batchRequest{Heartbeats: make([]batchItem, len(batch))}
	for i, call := range batch {
		req.Heartbeats[i] = batchItem{call.group, call.hb}
	}
	alone := func() {
		for _, call := range batch {
			call.alone = true
			call.finish()
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		alone()
		return
	}
	header := http.Header{"Accept": {"application/json"}, "Content-Type": {"application/json"}}
	resp, err := c.send(context.Background(), "POST", "/v1/heartbeats", nil, body, header, c.timeout)
	if err != nil {
		for _, call := range batch {
			call.err = err
			call.finish()
		}
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	var ans batchAnswer
	switch {
	case resp.StatusCode == http.StatusNotFound:
		c.batch.off.Store(true) // a daemon from before batches
		alone()
		return
	case err == nil && resp.StatusCode >= 500:
		// The daemon cannot serve (no leader, shutting down, failing): each heartbeat would
		// have had this answer alone.
		for _, call := range batch {
			call.err = answerError("POST", call.path(), resp.StatusCode, data)
			call.finish()
		}
		return
	case err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(data, &ans) != nil || len(ans.Answers) != len(batch):
		alone()
		return
	}
	for i, call := range batch {
		switch got := ans.Answers[i]; {
		case got.Status == http.StatusOK && got.Answer != nil:
			call.a = *got.Answer
		case got.Status >= 300:
			call.err = &Error{Method: "POST", Path: call.path(), StatusCode: got.Status, Message: got.Error}
		default:
			call.alone = true
		}
		call.finish()
	}
}
