package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Defaults of ConsumerOptions.
const (
	// DefaultHeartbeatInterval is a third of the daemon's default session timeout (30s), so a
	// member survives two lost heartbeats in a row.
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultPollWait is the wait of each long-poll, the daemon's default.
	DefaultPollWait = 30 * time.Second
	// DefaultRetryMin is the first delay after a failed request; it doubles with each failure
	// in a row, up to the heartbeat interval.
	DefaultRetryMin = 100 * time.Millisecond
)

// ConsumerOptions configure a Consumer. Zero values mean the defaults.
type ConsumerOptions struct {
	// InstanceID makes the member static: restarted with a new client id but the same
	// instance id, it takes its predecessor's place and queues.
	InstanceID string
	// Labels describe the member to the strategy, such as {"zone":"a","weight":"2"}.
	Labels map[string]string
	// HeartbeatInterval is the time between heartbeats (DefaultHeartbeatInterval). Keep it at a
	// third of the daemon's --session-timeout or less.
	HeartbeatInterval time.Duration
	// PollWait is how long each long-poll waits for a change (DefaultPollWait); the daemon caps
	// it at its --max-wait.
	PollWait time.Duration
	// DisableLongPoll leaves changes to arrive with heartbeats only, up to HeartbeatInterval
	// late, and saves the consumer's one open request per topic.
	DisableLongPoll bool
	// RetryMin is the first delay after a failed request (DefaultRetryMin); it doubles with
	// each failure in a row, up to HeartbeatInterval, with some jitter.
	RetryMin time.Duration
	// Clock times heartbeats and retries (SystemClock).
	Clock Clock
	// OnError, if set, is told of every failed request, from the consumer's goroutines: keep
	// it short. The consumer retries by itself; the last assignment stays in force meanwhile.
	OnError func(error)
	// OnHeartbeat, if set, is told of every heartbeat's round trip and result, for metrics.
	OnHeartbeat func(took time.Duration, err error)
	// OnRevoked, if set, is called with the queues of topic that generation takes away from
	// the consumer, before the consumer confirms that generation to the daemon: return once
	// work on them has stopped (in-flight messages finished, offsets committed). Under the
	// group's cooperative handoff their new owner gets them only after that confirmation,
	// which the consumer sends at once in a heartbeat of its own. It is also called with every
	// queue when the daemon refuses the member (409: removed for not confirming within the
	// group's revokeTimeout, or fenced). It runs on the goroutine that delivers Assignments,
	// which wait meanwhile. Without it, a generation counts as applied once Assignments has
	// delivered it (or, if Assignments is never called, once it has arrived).
	OnRevoked func(topic string, generation int64, queues []Queue)
}

// Assignment is a consumer's queues of one topic in one generation.
type Assignment struct {
	Topic      string
	Generation int64
	// Queues are the member's queues in the strategy's order; empty when it has none.
	Queues []Queue
}

// ErrClosed is returned by Start on a closed consumer.
var ErrClosed = errors.New("allocd: consumer closed")

// Consumer is one member of a consumer group. Start joins it and keeps it alive with
// heartbeats; every new generation of its topics arrives on Assignments, through a long-poll
// per topic as soon as the daemon publishes it; Close leaves the group.
//
// While the daemon is unreachable or refuses requests, the consumer retries with backoff and
// keeps its last assignment in force, as a RocketMQ consumer keeps its queues when a rebalance
// fails.
//
// The generations the consumer reports as applied in its heartbeats (visible in the group's
// status) are those its reader has received from Assignments, or, as long as Assignments has
// never been called, the latest it has received from the daemon.
type Consumer struct {
	c      *Client
	group  string
	cid    string
	topics []string
	opts   ConsumerOptions
	clock  Clock

	ctx    context.Context // the loops' context, canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	out    chan Assignment

	beatNow chan struct{} // asks the heartbeat loop for a heartbeat now
	notify  chan struct{} // tells the dispatcher of new pending assignments

	mu       sync.Mutex
	state    map[string]*topicState
	seq      uint64        // orders requests and answers, to tell a stale answer from a reset
	beaten   chan struct{} // closed and replaced at every successful heartbeat
	chanUsed bool
	pending  []*pendingAssignment // per topic, in arrival order
	started  bool                 // Start was called and has not failed
	running  bool                 // the loops run (until Close)
	closed   bool
}

type topicState struct {
	have      bool // a generation has been received
	gen       int64
	queues    []Queue
	recvSeq   uint64  // c.seq when gen was received
	resetSeq  uint64  // c.seq when the daemon was last seen to go back: older answers are stale
	delivered int64   // the generation last received from Assignments
	held      []Queue // the queues of the generation last delivered, less those revoked since
}

type pendingAssignment struct {
	a   Assignment
	ver uint64
}

// NewConsumer returns member cid of group, subscribed to topics. It sends nothing until Start.
// cid must be unique among the group's live members: DefaultCID gives one per process.
func (c *Client) NewConsumer(group, cid string, topics []string, opts ConsumerOptions) *Consumer {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.PollWait <= 0 {
		opts.PollWait = DefaultPollWait
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	opts.RetryMin = min(opts.RetryMin, opts.HeartbeatInterval)
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	opts.Labels = maps.Clone(opts.Labels)
	ts := slices.Clone(topics)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	ctx, cancel := context.WithCancel(context.Background())
	cons := &Consumer{
		c: c, group: group, cid: cid, topics: ts, opts: opts, clock: opts.Clock,
		ctx: ctx, cancel: cancel, out: make(chan Assignment),
		beatNow: make(chan struct{}, 1), notify: make(chan struct{}, 1),
		state: map[string]*topicState{}, beaten: make(chan struct{}),
	}
	for _, t := range ts {
		cons.state[t] = &topicState{}
	}
	return cons
}

// Group is the consumer's group.
func (c *Consumer) Group() string { return c.group }

// CID is the consumer's client id.
func (c *Consumer) CID() string { return c.cid }

// Start joins the group: it sends the first heartbeat, retrying network errors and the
// daemon's 5xx with backoff until ctx ends, and then runs the heartbeat and long-poll loops
// in the background until Close. A refusal that retrying cannot fix (a 4xx such as an unknown
// group or an invalid label) is returned at once, and Start may be called again.
func (c *Consumer) Start(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.started:
		c.mu.Unlock()
		return errors.New("allocd: consumer already started")
	}
	c.started = true
	c.mu.Unlock()

	fail := func(err error) error {
		c.mu.Lock()
		c.started = false
		c.mu.Unlock()
		switch {
		case c.ctx.Err() != nil:
			return ErrClosed
		case permanent(err):
			return err
		}
		return fmt.Errorf("allocd: joining group %q: %w (last error: %v)", c.group, ctx.Err(), err)
	}
	for failures := 0; ; {
		err := c.beat(ctx)
		if err == nil {
			break
		}
		if permanent(err) || ctx.Err() != nil || c.ctx.Err() != nil {
			return fail(err)
		}
		failures++
		if !c.sleep(ctx, c.backoff(failures)) {
			return fail(err)
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		// Closed while joining: leave, as Close could not.
		c.c.Leave(ctx, c.group, c.cid)
		return ErrClosed
	}
	// Under the mutex, so that Close, which sets closed under it, waits for these.
	c.running = true
	c.wg.Go(c.heartbeatLoop)
	if !c.opts.DisableLongPoll {
		for _, t := range c.topics {
			c.wg.Go(func() { c.pollLoop(t) })
		}
	}
	c.wg.Go(c.dispatch)
	c.mu.Unlock()
	return nil
}

// Close stops the loops and leaves the group, so the daemon gives the member's queues to the
// others at once rather than after the session timeout. It returns the leave's error; the
// consumer is stopped either way. Assignments is closed; assignments not yet received are
// dropped.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	running := c.running
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if !running {
		close(c.out)
		return nil
	}
	_, err := c.c.Leave(ctx, c.group, c.cid)
	return err
}

// Assignments delivers each new generation of each topic once, in order. A slow reader misses
// nothing that matters: while an assignment of a topic waits to be received, a newer one of the
// same topic replaces it. The consumer's loops never wait for the reader. The channel is closed
// by Close.
func (c *Consumer) Assignments() <-chan Assignment {
	c.mu.Lock()
	c.chanUsed = true
	c.mu.Unlock()
	return c.out
}

// Current returns the latest assignment of topic received from the daemon, and false before
// the first (or for a topic the consumer does not subscribe to).
func (c *Consumer) Current(topic string) (Assignment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state[topic]
	if st == nil || !st.have {
		return Assignment{Topic: topic}, false
	}
	return Assignment{Topic: topic, Generation: st.gen, Queues: slices.Clone(st.queues)}, true
}

// beat sends one heartbeat and applies its answer.
func (c *Consumer) beat(ctx context.Context) error {
	hb := Heartbeat{CID: c.cid, Topics: c.topics, InstanceID: c.opts.InstanceID, Labels: c.opts.Labels, Confirms: true}
	c.mu.Lock()
	hb.Generations = c.appliedLocked()
	c.seq++
	sent := c.seq
	c.mu.Unlock()
	start := time.Now()
	a, err := c.c.Heartbeat(ctx, c.group, hb)
	if c.opts.OnHeartbeat != nil {
		c.opts.OnHeartbeat(time.Since(start), err)
	}
	if err != nil {
		c.report(ctx, err)
		return err
	}
	if a.Lost {
		// A session this consumer had ended (it expired, or the daemon removed it): whatever
		// it was told is no longer its own.
		c.lost()
	}
	c.apply(a, sent)
	c.mu.Lock()
	close(c.beaten)
	c.beaten = make(chan struct{})
	c.mu.Unlock()
	return nil
}

func (c *Consumer) appliedLocked() map[string]int64 {
	gens := map[string]int64{}
	for t, st := range c.state {
		switch {
		case !st.have:
		case c.chanUsed || c.opts.OnRevoked != nil:
			if st.delivered > 0 {
				gens[t] = st.delivered
			}
		default:
			gens[t] = st.gen
		}
	}
	return gens
}

func (c *Consumer) report(ctx context.Context, err error) {
	if c.opts.OnError != nil && ctx.Err() == nil && c.ctx.Err() == nil {
		c.opts.OnError(err)
	}
}

// apply installs the generations of an answer to the request numbered sent. A generation
// replaces the one held when it is newer, or when it is older but the request was sent after
// the held one arrived: then the daemon lost or reset the group (deleted and declared again),
// and its word is the latest. An older generation in the answer to an earlier request is a
// stale answer, overtaken by another, and is ignored.
func (c *Consumer) apply(a MemberAssignment, sent uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	added := false
	for _, topic := range c.topics {
		gen, ok := a.Generations[topic]
		st := c.state[topic]
		if !ok || gen == st.gen || sent < st.resetSeq || gen < st.gen && sent < st.recvSeq {
			continue
		}
		c.seq++
		st.recvSeq = c.seq
		if gen < st.gen {
			st.resetSeq = c.seq
		}
		st.gen, st.have = gen, true
		st.queues = slices.Clone(a.Queues[topic])
		if st.queues == nil {
			st.queues = []Queue{}
		}
		c.enqueueLocked(Assignment{Topic: topic, Generation: gen, Queues: slices.Clone(st.queues)})
		added = true
	}
	if added {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// enqueueLocked queues a for the reader, replacing a waiting assignment of the same topic in
// its place.
func (c *Consumer) enqueueLocked(a Assignment) {
	c.seq++
	for _, p := range c.pending {
		if p.a.Topic == a.Topic {
			p.a, p.ver = a, c.seq
			return
		}
	}
	c.pending = append(c.pending, &pendingAssignment{a: a, ver: c.seq})
}

// dispatch hands pending assignments to the reader, oldest topic first, without ever holding
// up the loops that produce them.
func (c *Consumer) dispatch() {
	defer close(c.out)
	for {
		c.mu.Lock()
		if len(c.pending) == 0 {
			c.mu.Unlock()
			select {
			case <-c.notify:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		head := c.pending[0]
		a, ver := head.a, head.ver
		send := c.chanUsed || c.opts.OnRevoked == nil
		var revoked []Queue
		if st := c.state[a.Topic]; st != nil {
			revoked = without(st.held, a.Queues)
		}
		c.mu.Unlock()
		if len(revoked) > 0 && c.opts.OnRevoked != nil {
			c.opts.OnRevoked(a.Topic, a.Generation, slices.Clone(revoked))
			c.mu.Lock()
			if st := c.state[a.Topic]; st != nil {
				st.held = without(st.held, revoked)
			}
			c.mu.Unlock()
		}
		if send {
			select {
			case c.out <- a:
			case <-c.notify: // the head may have been replaced by a newer one
				continue
			case <-c.ctx.Done():
				return
			}
		}
		c.mu.Lock()
		if i := slices.Index(c.pending, head); i >= 0 && head.ver == ver {
			c.pending = slices.Delete(c.pending, i, i+1)
		}
		if st := c.state[a.Topic]; st != nil {
			st.delivered, st.held = a.Generation, a.Queues
		}
		c.mu.Unlock()
		if len(revoked) > 0 {
			// Confirm at once: under cooperative handoff the new owner waits for it.
			select {
			case c.beatNow <- struct{}{}:
			default:
			}
		}
	}
}

// without returns the queues of a that are not in b.
func without(a, b []Queue) []Queue {
	var out []Queue
	for _, q := range a {
		if !slices.Contains(b, q) {
			out = append(out, q)
		}
	}
	return out
}

// lost drops every queue after the daemon refused the member: it is not part of the group,
// whatever it was told. The reader gets an empty assignment of each topic that had queues.
func (c *Consumer) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	added := false
	for _, topic := range c.topics {
		st := c.state[topic]
		if len(st.queues) == 0 && len(st.held) == 0 {
			continue
		}
		st.queues = []Queue{}
		c.enqueueLocked(Assignment{Topic: topic, Generation: st.gen, Queues: []Queue{}})
		added = true
	}
	if added {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

// heartbeatLoop sends a heartbeat every HeartbeatInterval, counted from the start of the
// previous one (so a slow answer does not stretch the period), sooner after a failure (backoff)
// or when a long-poll finds the member unknown to the daemon.
func (c *Consumer) heartbeatLoop() {
	failures := 0
	last := c.clock.Now() // Start's heartbeat
	for {
		delay := c.opts.HeartbeatInterval - c.clock.Now().Sub(last)
		if failures > 0 {
			delay = c.backoff(failures)
		}
		t := c.clock.NewTimer(max(delay, 0))
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-c.beatNow:
			t.Stop()
		}
		last = c.clock.Now()
		if err := c.beat(c.ctx); err != nil {
			if c.ctx.Err() != nil {
				return
			}
			if StatusCode(err) == http.StatusConflict {
				c.lost()
			}
			failures++
		} else {
			failures = 0
		}
	}
}

// pollLoop long-polls one topic's assignment, one request at a time, for as long as the
// consumer runs.
func (c *Consumer) pollLoop(topic string) {
	failures := 0
	for c.ctx.Err() == nil {
		c.mu.Lock()
		after := c.state[topic].gen
		c.seq++
		sent := c.seq
		beaten := c.beaten
		c.mu.Unlock()
		start := time.Now() // the daemon's wait is real time, whatever clock the consumer has
		a, err := c.c.PollAssignment(c.ctx, c.group, c.cid, topic, after, c.opts.PollWait)
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if IsNotFound(err) {
				// The daemon does not know the member (yet, or any more: it missed its
				// session): a heartbeat joins it again. Wait for one rather than retrying blind.
				select {
				case c.beatNow <- struct{}{}:
				default:
				}
				t := c.clock.NewTimer(c.backoff(failures))
				select {
				case <-beaten:
				case <-t.C():
				case <-c.ctx.Done():
				}
				t.Stop()
				continue
			}
			c.report(c.ctx, err)
			c.sleep(c.ctx, c.backoff(failures))
			continue
		}
		changed := a.Generations[topic] != after
		c.apply(a, sent)
		if changed || time.Since(start) >= c.opts.PollWait/2 {
			failures = 0
			continue
		}
		// An early answer without a change: the daemon is shutting down or caps waits at
		// nothing. Do not spin.
		failures++
		c.sleep(c.ctx, c.backoff(failures))
	}
}

// backoff is the delay after n failures in a row: RetryMin doubled n-1 times, at most the
// heartbeat interval, less up to a fifth at random so that many consumers do not retry in step.
func (c *Consumer) backoff(n int) time.Duration {
	d := c.opts.RetryMin
	for i := 1; i < n && d < c.opts.HeartbeatInterval; i++ {
		d *= 2
	}
	d = min(d, c.opts.HeartbeatInterval)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// sleep waits d on the consumer's clock; it reports false if ctx or the consumer ended first.
func (c *Consumer) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	case <-c.ctx.Done():
		return false
	}
}
