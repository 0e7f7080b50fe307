package main_test

// The handoff checker: simulated members over the daemon's real HTTP API, each applying the
// generations it is told after a delay of its own, and a replay of every answer each member
// received, in order, that asserts the handoff invariant at every instant: no queue is held by
// two live members, where a member holds the queues of every generation it was told since the
// last one it applied. It also measures double ownership and queues without an owner.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/client"
)

type evKind int

const (
	evTold    evKind = iota // an answer with a newer generation arrived
	evApplied               // the member applied the newest generation it was told
	evGone                  // the member stopped (crashed or left): it holds nothing
	evLost                  // the daemon refused the member (409) or said its session was lost: it drops everything
)

type simEvent struct {
	at     time.Time
	member string
	kind   evKind
	gen    int64
	queues []abi.Queue
}

// sim is a set of simulated members of one group and topic, and the log of their events.
type sim struct {
	t            testing.TB
	url          string
	group, topic string
	hbEvery      time.Duration
	http         *http.Client

	mu      sync.Mutex
	events  []simEvent
	members map[string]*simMember
}

func newSim(t testing.TB, url, group, topic string, hbEvery time.Duration) *sim {
	s := &sim{t: t, url: url, group: group, topic: topic, hbEvery: hbEvery, members: map[string]*simMember{},
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	t.Cleanup(func() {
		s.mu.Lock()
		ms := make([]*simMember, 0, len(s.members))
		for _, m := range s.members {
			ms = append(ms, m)
		}
		s.mu.Unlock()
		for _, m := range ms {
			m.stop()
		}
	})
	return s
}

func (s *sim) record(e simEvent) {
	s.mu.Lock()
	e.at = time.Now()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

func (s *sim) log() []simEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// simMember is one member: a heartbeat loop and a long-poll loop. It applies each new
// generation after delay(), confirming it in a heartbeat sent at once; a stuck member applies
// nothing more (and so confirms nothing) but keeps heartbeating.
type simMember struct {
	s      *sim
	cid    string
	delay  func() time.Duration
	stuck  atomic.Bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	poke   chan struct{}

	mu         sync.Mutex
	told       int64
	toldQueues []abi.Queue
	applied    int64
	applying   bool
	gone       bool // stopped: a pending apply must not record anything
}

// join starts member cid, applying generations after a random delay up to maxDelay.
func (s *sim) join(cid string, maxDelay time.Duration, seed uint64) *simMember {
	r := rand.New(rand.NewPCG(seed, 7))
	var rmu sync.Mutex
	m := &simMember{s: s, cid: cid, poke: make(chan struct{}, 1), delay: func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		if maxDelay <= 0 {
			return 0
		}
		return time.Duration(r.Int64N(int64(maxDelay)))
	}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.members[cid] = m
	s.mu.Unlock()
	m.wg.Go(m.heartbeatLoop)
	m.wg.Go(m.pollLoop)
	return m
}

func (m *simMember) stop() {
	m.mu.Lock()
	m.gone = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// crash stops the member without a word: the daemon finds out at the session timeout.
func (m *simMember) crash() {
	m.stop()
	m.s.record(simEvent{member: m.cid, kind: evGone})
}

// leave stops the member's work, then tells the daemon.
func (m *simMember) leave() {
	m.stop()
	m.s.record(simEvent{member: m.cid, kind: evGone})
	body, _ := json.Marshal(map[string]string{"cid": m.cid})
	resp, err := m.s.http.Post(m.s.url+"/v1/groups/"+m.s.group+"/leave", "application/json", bytes.NewReader(body))
	if err != nil {
		m.s.t.Errorf("leave of %s: %v", m.cid, err)
		return
	}
	resp.Body.Close()
}

func (m *simMember) appliedGen() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied
}

func (m *simMember) heartbeatLoop() {
	for {
		m.beat()
		t := time.NewTimer(m.s.hbEvery)
		select {
		case <-m.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-m.poke:
			t.Stop()
		}
	}
}

func (m *simMember) beat() {
	hb := client.Heartbeat{CID: m.cid, Topics: []string{m.s.topic}, Confirms: true}
	m.mu.Lock()
	if m.applied > 0 {
		hb.Generations = map[string]int64{m.s.topic: m.applied}
	}
	m.mu.Unlock()
	body, _ := json.Marshal(hb)
	req, _ := http.NewRequestWithContext(m.ctx, "POST", m.s.url+"/v1/groups/"+m.s.group+"/heartbeat", bytes.NewReader(body))
	resp, err := m.s.http.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		var a client.MemberAssignment
		if json.Unmarshal(b, &a) == nil {
			if a.Lost {
				m.lose()
			}
			m.answer(a)
		}
	case http.StatusConflict:
		m.lose()
	}
}

// lose drops everything: the daemon no longer counts the member as the one it was.
func (m *simMember) lose() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.told > 0 {
		m.told, m.toldQueues, m.applied = 0, nil, 0
		m.s.record(simEvent{member: m.cid, kind: evLost})
		m.stuck.Store(false) // a new incarnation behaves
	}
}

func (m *simMember) pollLoop() {
	for m.ctx.Err() == nil {
		m.mu.Lock()
		after := m.told
		m.mu.Unlock()
		q := url.Values{"cid": {m.cid}, "topic": {m.s.topic}, "after": {fmt.Sprint(after)}, "wait": {"5s"}}
		req, _ := http.NewRequestWithContext(m.ctx, "GET", m.s.url+"/v1/groups/"+m.s.group+"/assignment?"+q.Encode(), nil)
		resp, err := m.s.http.Do(req)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			// Not a member (yet, or any more): the heartbeat loop joins it again.
			select {
			case m.poke <- struct{}{}:
			default:
			}
			select {
			case <-m.ctx.Done():
			case <-time.After(m.s.hbEvery / 4):
			}
			continue
		}
		var a client.MemberAssignment
		if json.Unmarshal(b, &a) == nil {
			m.answer(a)
		}
	}
}

// answer takes an answer: a newer generation is told (held from now on), and applied later.
func (m *simMember) answer(a client.MemberAssignment) {
	gen, ok := a.Generations[m.s.topic]
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen <= m.told || m.gone {
		return
	}
	m.told, m.toldQueues = gen, slices.Clone(a.Queues[m.s.topic])
	m.s.record(simEvent{member: m.cid, kind: evTold, gen: gen, queues: m.toldQueues})
	if m.stuck.Load() || m.applying {
		return
	}
	m.applying = true
	time.AfterFunc(m.delay(), m.apply)
}

// apply applies the newest generation told: the member now works on its queues only.
func (m *simMember) apply() {
	m.mu.Lock()
	m.applying = false
	if m.stuck.Load() || m.gone || m.told == 0 {
		m.mu.Unlock()
		return
	}
	m.applied = m.told
	m.s.record(simEvent{member: m.cid, kind: evApplied, gen: m.told, queues: m.toldQueues})
	m.mu.Unlock()
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// replayReport is what the replay found.
type replayReport struct {
	overlaps    int      // events after which some queue had two live holders
	examples    []string // the first few
	doubleQS    float64  // queue-seconds during which a queue had two or more holders
	maxNoOwner  time.Duration
	noOwnerAt   string
	noOwnerSum  time.Duration // over every stretch without an owner
	noOwnerN    int
	toldChecked int
}

// removal is a member the daemon removed (expired, or for not confirming in time), and the
// first generation published after its removal.
type removal struct {
	member string
	gen    int64
}

// replay runs the event log through the invariant. From the first answer of a removal's
// generation on, its member is not live, whatever it still believes, until it learns of its
// removal (evLost). Metrics count from the first event at or after from, over queues.
func replay(events []simEvent, removals []removal, queues []abi.Queue, from time.Time) replayReport {
	var r replayReport
	holds := map[string]map[abi.Queue]bool{}
	ignoring := map[string]bool{}
	removed := slices.Clone(removals)
	noOwnerSince := map[abi.Queue]time.Time{}
	var prev time.Time
	holders := func() map[abi.Queue][]string {
		out := map[abi.Queue][]string{}
		for m, set := range holds {
			for q := range set {
				out[q] = append(out[q], m)
			}
		}
		return out
	}
	for _, e := range events {
		if !prev.IsZero() && !e.at.Before(from) {
			start := prev
			if start.Before(from) {
				start = from
			}
			dt := e.at.Sub(start).Seconds()
			for _, hs := range holders() {
				if len(hs) > 1 {
					r.doubleQS += dt
				}
			}
		}
		prev = e.at
		if e.kind == evTold || e.kind == evApplied {
			removed = slices.DeleteFunc(removed, func(rm removal) bool {
				if e.gen >= rm.gen && rm.member != e.member {
					delete(holds, rm.member)
					ignoring[rm.member] = true
					return true
				}
				return false
			})
		}
		switch {
		case e.kind == evLost:
			delete(holds, e.member)
			if ignoring[e.member] {
				delete(ignoring, e.member)
			} else if i := slices.IndexFunc(removed, func(rm removal) bool { return rm.member == e.member }); i >= 0 {
				removed = slices.Delete(removed, i, i+1) // it learned before anyone was told otherwise
			}
		case ignoring[e.member]:
		case e.kind == evTold:
			if holds[e.member] == nil {
				holds[e.member] = map[abi.Queue]bool{}
			}
			for _, q := range e.queues {
				holds[e.member][q] = true
			}
		case e.kind == evApplied:
			holds[e.member] = map[abi.Queue]bool{}
			for _, q := range e.queues {
				holds[e.member][q] = true
			}
		case e.kind == evGone:
			delete(holds, e.member)
		}
		hs := holders()
		bad := false
		for q, who := range hs {
			if len(who) > 1 {
				bad = true
				if len(r.examples) < 5 {
					slices.Sort(who)
					r.examples = append(r.examples, fmt.Sprintf("%s held by %v after %s's event %d (generation %d)", q, who, e.member, e.kind, e.gen))
				}
			}
		}
		if bad {
			r.overlaps++
		}
		if e.at.Before(from) {
			continue
		}
		for _, q := range queues {
			since, waiting := noOwnerSince[q]
			switch {
			case len(hs[q]) == 0 && !waiting:
				noOwnerSince[q] = e.at
			case len(hs[q]) > 0 && waiting:
				d := e.at.Sub(since)
				r.noOwnerSum += d
				r.noOwnerN++
				if d > r.maxNoOwner {
					r.maxNoOwner, r.noOwnerAt = d, fmt.Sprintf("%s until %s's event %d (generation %d)", q, e.member, e.kind, e.gen)
				}
				delete(noOwnerSince, q)
			}
		}
	}
	return r
}
