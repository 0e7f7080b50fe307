package server

// Parked long-polls. A held HTTP/1.1 request costs net/http a goroutine (two, with the one
// that watches the connection), 4 KiB read and write buffers, a 2 KiB response buffer and its
// request state: about 22 KiB in use, and more in RSS. An assignment long-poll that has to
// wait is therefore taken over from net/http (hijacked) and parked: what stays is the
// connection and a small record in its group's waiter, one goroutine per group with parked
// polls, which answers them as the handler would have (on a change, at the end of the wait,
// at shutdown) and closes the connection, as the answer says ("Connection: close"): the
// client's next poll opens a new one. HTTP/2 streams cannot be taken over; they wait in their
// handler as before.

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allocd/allocd/coordinator"
)

// answerTimeout bounds writing a parked poll's answer to its connection.
const answerTimeout = 10 * time.Second

// parkedPoll is one parked long-poll.
type parkedPoll struct {
	conn     net.Conn
	group    string
	q        pollQuery
	start    time.Time // when the request arrived, for the latency metric
	deadline time.Time // the end of its wait
	index    int       // in its waiter's heap
}

// parking holds the parked long-polls by group.
type parking struct {
	mu      sync.Mutex
	waiters map[string]*groupWaiter
	// busy counts parked polls and answers being written, for Drain; idle is signalled
	// (capacity 1) each time it falls to zero.
	busy atomic.Int64
	idle chan struct{}
}

// done ends one parked poll's answer.
func (pk *parking) done() {
	if pk.busy.Add(-1) == 0 {
		select {
		case pk.idle <- struct{}{}:
		default:
		}
	}
}

// groupWaiter answers one group's parked polls; its goroutine ends when it has none.
type groupWaiter struct {
	polls pollHeap      // by deadline
	fresh []*parkedPoll // parked since the waiter last looked
	added chan struct{} // a poll was parked (capacity 1)
}

// park takes the long-poll of r over from net/http and leaves it to its group's waiter.
// It reports false, having done nothing, when the request cannot be taken over (HTTP/2, HEAD).
func (s *Server) park(w http.ResponseWriter, r *http.Request, group string, q pollQuery, wait time.Duration) bool {
	if s.opts.NoParking || r.ProtoMajor != 1 || r.Method != http.MethodGet || wait <= 0 {
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.hijacked = true
	}
	now := time.Now()
	p := &parkedPoll{conn: conn, group: group, q: q, start: now, deadline: now.Add(wait)}
	s.waiting.Add(1)
	s.parked.busy.Add(1)
	s.parked.mu.Lock()
	gw := s.parked.waiters[group]
	if gw == nil {
		if s.parked.waiters == nil {
			s.parked.waiters = map[string]*groupWaiter{}
		}
		gw = &groupWaiter{added: make(chan struct{}, 1)}
		s.parked.waiters[group] = gw
		go s.waitGroup(group, gw)
	}
	heap.Push(&gw.polls, p)
	gw.fresh = append(gw.fresh, p)
	s.parked.mu.Unlock()
	select {
	case gw.added <- struct{}{}:
	default:
	}
	return true
}

// waitGroup is a group waiter's goroutine: it answers each parked poll when the member's
// assignment is newer than the poll's after (or Poll fails: the member or group is gone),
// when its wait ends, or at shutdown. A change of the group checks every poll; a newly parked
// one is checked on its own, as a change may have come between its handler's check and now.
func (s *Server) waitGroup(group string, gw *groupWaiter) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var changed <-chan struct{}
	all := false
	for {
		final := s.draining() || isClosed(s.c.Done())
		all = all || final || changed == nil || isClosed(changed)
		s.parked.mu.Lock()
		check := gw.fresh
		gw.fresh = nil
		if all {
			check = append([]*parkedPoll(nil), gw.polls...)
		}
		s.parked.mu.Unlock()
		now := time.Now()
		var answer []answerOf
		var first <-chan struct{} // the channel of the scan's first check: the oldest state seen
		for _, p := range check {
			a, ch, err := s.c.Poll(group, p.q.cid, p.q.topics)
			if first == nil {
				first = ch
			}
			if err != nil || final || a.Newer(p.q.after) || !now.Before(p.deadline) {
				answer = append(answer, answerOf{p: p, a: a, err: err})
			}
		}
		if first != nil && (all || changed == nil) {
			changed = first
		}
		all = false
		s.parked.mu.Lock()
		// A poll is answered once: one already popped (its wait ended) since it was
		// checked is left out.
		kept := answer[:0]
		for _, x := range answer {
			if i := x.p.index; i >= 0 && i < len(gw.polls) && gw.polls[i] == x.p {
				heap.Remove(&gw.polls, i)
				kept = append(kept, x)
			}
		}
		answer = kept
		// Polls whose wait has ended answer their current assignment.
		for gw.polls.Len() > 0 && !now.Before(gw.polls[0].deadline) {
			p := heap.Pop(&gw.polls).(*parkedPoll)
			a, _, err := s.c.Poll(group, p.q.cid, p.q.topics)
			answer = append(answer, answerOf{p: p, a: a, err: err})
		}
		empty := gw.polls.Len() == 0 && len(gw.fresh) == 0
		if empty {
			delete(s.parked.waiters, group)
		}
		var next time.Time
		if gw.polls.Len() > 0 {
			next = gw.polls[0].deadline
		}
		s.parked.mu.Unlock()
		for _, x := range answer {
			go s.answerParked(x)
		}
		if empty {
			return
		}
		if next.IsZero() {
			next = now.Add(time.Hour)
		}
		timer.Reset(time.Until(next))
		select {
		case <-changed:
			all = true
		case <-timer.C:
		case <-gw.added:
		case <-s.drain:
		case <-s.c.Done():
		}
	}
}

// answerOf is a parked poll with its answer: the member's assignment, or Poll's error.
type answerOf struct {
	p   *parkedPoll
	a   coordinator.Assignment
	err error
}

// answerParked writes a parked poll's answer and closes its connection.
func (s *Server) answerParked(x answerOf) {
	p := x.p
	defer s.parked.done()
	defer s.waiting.Add(-1)
	defer p.conn.Close()
	status, body := http.StatusOK, []byte(nil)
	if x.err != nil {
		status = statusOf(x.err)
		if status >= 500 {
			s.log.Error().Err(x.err).Str("group", p.group).Int("status", status).Msg("request failed")
		}
		body, _ = encodeJSON(errorBody{Error: x.err.Error()})
	} else {
		body, _ = encodeJSON(x.a)
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	head.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	head.WriteString("Connection: close\r\nDate: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n\r\n")
	p.conn.SetWriteDeadline(time.Now().Add(answerTimeout))
	bufs := net.Buffers{head.Bytes(), body}
	_, werr := bufs.WriteTo(p.conn)
	s.requests.WithLabelValues(assignmentRoute, strconv.Itoa(status)).Inc()
	s.seconds.WithLabelValues(assignmentRoute).Observe(time.Since(p.start).Seconds())
	ev := s.log.Debug().Str("method", http.MethodGet).Str("path", "/v1/groups/"+p.group+"/assignment").Int("status", status).
		Dur("took", time.Since(p.start)).Bool("parked", true)
	if werr != nil {
		ev = ev.AnErr("writeError", werr)
	}
	ev.Msg("request")
}

// assignmentRoute is the long-poll's route label in the request metrics.
const assignmentRoute = "GET /v1/groups/{group}/assignment"

// drainParked waits, at most d, until every parked poll has been answered.
func (s *Server) drainParked(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for s.parked.busy.Load() > 0 {
		select {
		case <-s.parked.idle:
		case <-timer.C:
			s.log.Warn().Int64("polls", s.parked.busy.Load()).Msg("shutting down with long-polls not answered in time")
			return
		}
	}
}

// encodeJSON is v as the API answers it: JSON without HTML escaping, newline-terminated.
func encodeJSON(v any) ([]byte, error) {
	if a, ok := v.(coordinator.Assignment); ok {
		if b, ok := appendAssignment(nil, a); ok {
			return b, nil
		}
	}
	return encodeAny(v)
}

// encodeAny is encodeJSON through encoding/json.
func encodeAny(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pollHeap orders parked polls by deadline.
type pollHeap []*parkedPoll

func (h pollHeap) Len() int           { return len(h) }
func (h pollHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h pollHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *pollHeap) Push(x any) {
	p := x.(*parkedPoll)
	p.index = len(*h)
	*h = append(*h, p)
}
func (h *pollHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.index = -1 // out of the heap
	return p
}
