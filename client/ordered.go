package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/allocd/allocd/abi"
)

// Defaults of OrderedOptions.
const (
	// DefaultLockLease is the lease asked for, the daemon's default (RocketMQ's 60 s).
	DefaultLockLease = 60 * time.Second
	// lockCheckEvery is how often the queue-lock loop looks at the consumer's assignment.
	lockCheckEvery = 200 * time.Millisecond
	// minLockRetry and maxLockRetry bound the wait before asking again for a refused lock.
	minLockRetry = 20 * time.Millisecond
	maxLockRetry = 5 * time.Second
)

// ErrLockLost cancels the context of work done under a lock that the member no longer holds
// (the lease ran out, the daemon refused a renewal or dropped the member), and is returned by
// WithQueue and Do in that case. Work already written with the lock's token is refused by a
// store that checks tokens, so nothing the member did after losing the lock can commit.
var ErrLockLost = errors.New("allocd: lock lost")

// ErrNotAssigned is returned by WithQueue for a queue that the member is not assigned.
var ErrNotAssigned = errors.New("allocd: queue not assigned to this member")

// OrderedOptions configure an Ordered. Zero values mean the defaults.
type OrderedOptions struct {
	// Lease is the lease of every lock (DefaultLockLease; 10 s to 12 h).
	Lease time.Duration
	// RenewEvery is the time between renewals (Lease/3), so that two renewals in a row may fail
	// before the lease runs out.
	RenewEvery time.Duration
	// Clock times renewals and local lease ends (SystemClock).
	Clock Clock
	// OnError, if set, is told of every failed lock call. Calls are retried by themselves.
	OnError func(error)
}

// Ordered is a consumer's ordered-consumption helper. For a queue-based orderly group, Start
// runs a loop that keeps the locks of the consumer's assigned queues: it takes new ones, renews
// held ones every RenewEvery, unlocks those moved away (once no WithQueue call is using them),
// and forgets any it loses. WithQueue runs work under a queue's lock. For a message-based
// orderly group, Do runs work under a message group's lock, renewing it meanwhile and
// releasing it after. Both hand the work the lock's fencing token, to be passed with every
// commit so that the store (through the daemon's /locks/check) refuses a stale holder's.
//
// A lock counts as held locally only until the time its last successful request was sent plus
// the lease: never longer than on the daemon, whose lease starts when it receives the request.
type Ordered struct {
	c     *Client
	cons  *Consumer
	opts  OrderedOptions
	clock Clock

	ctx    context.Context // the loop's, canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu      sync.Mutex
	local   map[[2]string]*turn // per (topic, message group): one Do at a time here
	held    map[Queue]*heldQueue
	retryAt map[Queue]time.Time
	changed chan struct{} // closed and replaced whenever held changes
	last    time.Time     // when the loop last sent a lock call
	fails   int           // lock calls failed in a row
	gens    map[string]int64
	started bool
}

// turn lets one Do at a time hold a message group in this process.
type turn struct {
	ch    chan struct{}
	users int // Do calls waiting or running
}

type heldQueue struct {
	token  uint64
	until  time.Time // local end of the lease
	moving bool      // no longer assigned: unlock once unused
	users  map[*int]context.CancelCauseFunc
}

// NewOrdered returns cons's ordered-consumption helper. cons must be started (a member) for
// locks to be granted.
func (c *Client) NewOrdered(cons *Consumer, opts OrderedOptions) *Ordered {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLockLease
	}
	if opts.RenewEvery <= 0 || opts.RenewEvery >= opts.Lease {
		opts.RenewEvery = opts.Lease / 3
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Ordered{
		c: c, cons: cons, opts: opts, clock: opts.Clock, ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), held: map[Queue]*heldQueue{}, retryAt: map[Queue]time.Time{},
		local:   map[[2]string]*turn{},
		changed: make(chan struct{}), gens: map[string]int64{},
	}
}

// Start runs the queue-lock loop until Close. Only queue-based orderly groups need it.
func (o *Ordered) Start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started || o.ctx.Err() != nil {
		return
	}
	o.started = true
	o.wg.Go(o.loop)
}

// Close stops the loop, cancels running WithQueue work with ErrLockLost, and unlocks every
// queue held.
func (o *Ordered) Close(ctx context.Context) error {
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	var qs []Queue
	for q, h := range o.held {
		h.lose()
		qs = append(qs, q)
	}
	o.held = map[Queue]*heldQueue{}
	o.notifyLocked()
	o.mu.Unlock()
	if len(qs) == 0 {
		return nil
	}
	_, err := o.c.UnlockQueues(ctx, o.cons.group, o.cons.cid, qs)
	return err
}

// Held returns the queue locks held now, with their tokens and local lease ends (as Expires).
func (o *Ordered) Held() []QueueLock {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	var out []QueueLock
	for q, h := range o.held {
		if now.Before(h.until) {
			out = append(out, QueueLock{Queue: q, Token: h.token, Expires: h.until})
		}
	}
	slices.SortFunc(out, func(a, b QueueLock) int { return abi.CompareQueues(a.Queue, b.Queue) })
	return out
}

// WithQueue runs fn under queue q's lock: it waits until the loop holds the lock (or ctx ends,
// or q is not assigned to the member: ErrNotAssigned), then calls fn with the token. The lock
// is not unlocked while fn runs, even if a rebalance moves q away; fn's context is canceled
// with ErrLockLost if the lock is lost meanwhile, and WithQueue then returns ErrLockLost
// (joined with fn's error).
func (o *Ordered) WithQueue(ctx context.Context, q Queue, fn func(ctx context.Context, token uint64) error) error {
	for {
		o.mu.Lock()
		h := o.held[q]
		if h != nil && !h.moving && o.clock.Now().Before(h.until) {
			break // o.mu held
		}
		assigned := o.assigned(q)
		changed := o.changed
		o.mu.Unlock()
		if !assigned {
			return ErrNotAssigned
		}
		o.poke()
		t := o.clock.NewTimer(lockCheckEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-changed:
		case <-t.C():
		}
		t.Stop()
	}
	h := o.held[q]
	token := h.token
	fctx, cancel := context.WithCancelCause(ctx)
	id := new(int)
	if h.users == nil {
		h.users = map[*int]context.CancelCauseFunc{}
	}
	h.users[id] = cancel
	o.mu.Unlock()

	err := fn(fctx, token)

	o.mu.Lock()
	delete(h.users, id)
	o.mu.Unlock()
	o.poke()
	lost := errors.Is(context.Cause(fctx), ErrLockLost)
	cancel(nil)
	if lost {
		return errors.Join(ErrLockLost, err)
	}
	return err
}

// assigned reports whether the consumer's current assignment has q.
func (o *Ordered) assigned(q Queue) bool {
	a, _ := o.cons.Current(q.Topic)
	return slices.Contains(a.Queues, q)
}

func (o *Ordered) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

func (o *Ordered) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// lose cancels the work running under h.
func (h *heldQueue) lose() {
	for _, cancel := range h.users {
		cancel(ErrLockLost)
	}
}

func (o *Ordered) loop() {
	for {
		o.step()
		t := o.clock.NewTimer(lockCheckEvery)
		select {
		case <-o.ctx.Done():
			t.Stop()
			return
		case <-o.kick:
		case <-t.C():
		}
		t.Stop()
	}
}

// step makes one pass: lock what is assigned when due, unlock what moved away and is unused,
// and forget what ran out.
func (o *Ordered) step() {
	var want []Queue
	changed := false
	for _, topic := range o.cons.topics {
		a, ok := o.cons.Current(topic)
		if !ok {
			continue
		}
		want = append(want, a.Queues...)
		o.mu.Lock()
		if o.gens[topic] != a.Generation {
			o.gens[topic] = a.Generation
			changed = true
		}
		o.mu.Unlock()
	}
	now := o.clock.Now()
	o.mu.Lock()
	for q, h := range o.held {
		if !now.Before(h.until) {
			h.lose()
			delete(o.held, q)
			changed = true
		}
		if !slices.Contains(want, q) && !h.moving {
			h.moving = true
			changed = true
		}
	}
	due := changed || !now.Before(o.last.Add(o.opts.RenewEvery))
	for _, q := range want {
		if o.held[q] == nil && !now.Before(o.retryAt[q]) {
			due = true
		}
	}
	var unlock []Queue
	for q, h := range o.held {
		if h.moving && len(h.users) == 0 {
			unlock = append(unlock, q)
			delete(o.held, q)
			changed = true
		}
	}
	if changed {
		o.notifyLocked()
	}
	o.mu.Unlock()

	if len(unlock) > 0 {
		if _, err := o.c.UnlockQueues(o.ctx, o.cons.group, o.cons.cid, unlock); err != nil {
			o.report(err) // the lease ends the lock anyway
		}
	}
	if !due || len(want) == 0 {
		return
	}
	sent := o.clock.Now()
	locked, refused, err := o.c.LockQueues(o.ctx, o.cons.group, o.cons.cid, want, o.opts.Lease)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = sent
	if err != nil {
		o.report(err)
		// Retry with backoff: renewals, and queues not held yet.
		o.fails++
		wait := o.cons.backoff(o.fails)
		o.last = sent.Add(wait - o.opts.RenewEvery)
		for _, q := range want {
			o.retryAt[q] = sent.Add(wait)
		}
		if IsNotFound(err) {
			// The daemon does not know the member: it released every lock of it.
			for q, h := range o.held {
				h.lose()
				delete(o.held, q)
			}
			o.notifyLocked()
		}
		return
	}
	o.fails = 0
	until := sent.Add(o.opts.Lease)
	for _, l := range locked {
		h := o.held[l.Queue]
		if h != nil && h.token != l.Token {
			h.lose() // a new grant: the old token is stale
			h = nil
		}
		if h == nil {
			h = &heldQueue{token: l.Token}
			o.held[l.Queue] = h
		}
		h.until, h.moving = until, !slices.Contains(want, l.Queue)
		delete(o.retryAt, l.Queue)
	}
	for _, r := range refused {
		h := o.held[r.Queue]
		switch {
		case h != nil && r.Reason == ReasonNotOwner && r.Holder == o.cons.cid:
			h.moving = true // still ours until the lease ends; unlock once unused
		case h != nil:
			h.lose()
			delete(o.held, r.Queue)
		}
		o.retryAt[r.Queue] = sent.Add(min(max(r.RetryAfter, minLockRetry), maxLockRetry))
		if r.RetryAfter == 0 {
			o.retryAt[r.Queue] = sent.Add(o.opts.RenewEvery) // only a rebalance helps
		}
	}
	o.notifyLocked()
}

func (o *Ordered) report(err error) {
	if o.opts.OnError != nil && o.ctx.Err() == nil {
		o.opts.OnError(err)
	}
}

// Do runs fn under the lock of message group messageGroup of topic: it asks for the lock until
// it is granted (waiting as the daemon says between refusals) or ctx ends, renews it every
// RenewEvery while fn runs, and releases it after: Done when fn returns nil, Retry otherwise.
// fn gets the grant (its Token to fence commits with, its Attempt, and DeadLetter when the
// head message has failed too often). If the lock is lost while fn runs, fn's context is
// canceled with ErrLockLost, nothing is released, and Do returns ErrLockLost joined with fn's
// error. Calls for one message group in one process take turns.
func (o *Ordered) Do(ctx context.Context, topic, messageGroup string, fn func(ctx context.Context, l MessageGroupLock) error) error {
	_, err := o.run(ctx, topic, messageGroup, true, fn)
	return err
}

// TryDo is Do without waiting: when the message group is held (here or by another member), or
// kept for another member, it returns false at once and fn does not run. A consumer serving
// many message groups moves on to the next one instead of queuing behind a slow one.
func (o *Ordered) TryDo(ctx context.Context, topic, messageGroup string, fn func(ctx context.Context, l MessageGroupLock) error) (ran bool, err error) {
	return o.run(ctx, topic, messageGroup, false, fn)
}

func (o *Ordered) run(ctx context.Context, topic, messageGroup string, wait bool, fn func(ctx context.Context, l MessageGroupLock) error) (bool, error) {
	// The daemon knows the member, not its goroutines: a second call for the same group in
	// this process would renew the first one's grant. Take turns here first.
	k := [2]string{topic, messageGroup}
	o.mu.Lock()
	tn := o.local[k]
	if tn == nil {
		tn = &turn{ch: make(chan struct{}, 1)}
		o.local[k] = tn
	}
	tn.users++
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		if tn.users--; tn.users == 0 {
			delete(o.local, k)
		}
		o.mu.Unlock()
	}()
	if wait {
		select {
		case tn.ch <- struct{}{}:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	} else {
		select {
		case tn.ch <- struct{}{}:
		default:
			return false, nil // another call here holds it
		}
	}
	defer func() { <-tn.ch }()

	var l MessageGroupLock
	var sent time.Time
	for failures := 0; ; {
		var err error
		sent = o.clock.Now()
		l, err = o.c.LockMessageGroup(ctx, o.cons.group, o.cons.cid, topic, messageGroup, o.opts.Lease)
		var delay time.Duration
		switch {
		case err != nil && (permanent(err) || ctx.Err() != nil || !wait):
			return false, err
		case err != nil:
			o.report(err)
			failures++
			delay = o.cons.backoff(failures)
		case l.Granted:
		case !wait:
			return false, nil
		default:
			failures = 0
			delay = min(max(l.RetryAfter, minLockRetry), maxLockRetry)
		}
		if err == nil && l.Granted {
			break
		}
		t := o.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, context.Cause(ctx)
		case <-t.C():
		}
	}
	return true, o.hold(ctx, l, sent, fn)
}

// hold runs fn under a granted message-group lock, renewing it meanwhile, and releases it.
func (o *Ordered) hold(ctx context.Context, l MessageGroupLock, sent time.Time, fn func(ctx context.Context, l MessageGroupLock) error) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		o.renew(fctx, cancel, stop, l, sent)
	}()
	err := fn(fctx, l)
	close(stop)
	<-renewed
	if errors.Is(context.Cause(fctx), ErrLockLost) {
		return errors.Join(ErrLockLost, err)
	}
	outcome := Done
	if err != nil {
		outcome = Retry
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), o.c.timeout)
	defer rcancel()
	if rerr := o.c.ReleaseMessageGroup(rctx, o.cons.group, o.cons.cid, l.Topic, l.MessageGroup, l.Token, outcome); rerr != nil {
		if IsConflict(rerr) {
			return errors.Join(ErrLockLost, err)
		}
		return errors.Join(err, rerr)
	}
	return err
}

// renew renews a message-group lock every RenewEvery until stop, and cancels the work with
// ErrLockLost when the lock is lost or its local lease runs out unrenewed.
func (o *Ordered) renew(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}, l MessageGroupLock, sent time.Time) {
	until := sent.Add(o.opts.Lease)
	for {
		wait := min(o.opts.RenewEvery, until.Sub(o.clock.Now()))
		t := o.clock.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		now := o.clock.Now()
		if !now.Before(until) {
			cancel(ErrLockLost)
			return
		}
		// Check first: after the member was dropped (and joined again) or the lease ran out,
		// a lock call would be a new grant, counting a failed attempt when given back.
		var r MessageGroupLock
		res, err := o.c.CheckMessageGroupLock(ctx, o.cons.group, l.Topic, l.MessageGroup, l.Token)
		if err == nil && !res.Valid {
			cancel(ErrLockLost)
			return
		}
		if err == nil {
			r, err = o.c.LockMessageGroup(ctx, o.cons.group, o.cons.cid, l.Topic, l.MessageGroup, o.opts.Lease)
		}
		switch {
		case err != nil && permanent(err):
			cancel(ErrLockLost)
			return
		case err != nil:
			o.report(err) // try again at the next turn, while the lease lasts
		case !r.Granted || r.Token != l.Token:
			if r.Granted {
				// The lease had run out and this is a new grant: give it back as a failure.
				o.c.ReleaseMessageGroup(context.WithoutCancel(ctx), o.cons.group, o.cons.cid, l.Topic, l.MessageGroup, r.Token, Retry)
			}
			cancel(ErrLockLost)
			return
		default:
			until = now.Add(o.opts.Lease)
		}
	}
}
