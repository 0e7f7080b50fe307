package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allocd/allocd/route"
)

// DefaultRefreshInterval is how long a producer uses a route before asking again, RocketMQ's
// default for polling the name server.
const DefaultRefreshInterval = 30 * time.Second

// ErrNoQueues is returned by a producer whose topic has no writable queues.
var ErrNoQueues = errors.New("allocd: topic has no writable queues")

// ProducerOptions configure a Producer. Zero values mean the defaults.
type ProducerOptions struct {
	// RefreshInterval is how long a route is used before it is fetched again
	// (DefaultRefreshInterval).
	RefreshInterval time.Duration
	// RetryMin is the first delay before a failed fetch is tried again (DefaultRetryMin); it
	// doubles with each failure in a row, up to RefreshInterval. Meanwhile the last route is
	// used.
	RetryMin time.Duration
	// Clock ages the route (SystemClock).
	Clock Clock
}

// Producer chooses the queue of each message a producer sends to one topic, from a cached
// route: the topic's writable queues, in the daemon's order. The route is fetched on first use,
// again once it is RefreshInterval old or after Invalidate, and kept in use while the daemon
// cannot be reached. A Producer sends nothing itself and is safe for concurrent use.
type Producer struct {
	c     *Client
	topic string
	opts  ProducerOptions
	clock Clock
	rr    atomic.Uint64

	mu       sync.Mutex
	queues   []Queue
	have     bool
	fetched  time.Time
	stale    bool
	failures int
	retryAt  time.Time
	lastErr  error
	inflight chan struct{} // closed when the fetch in progress ends
}

// NewProducer returns a producer's queue chooser for topic. It fetches nothing until used.
func (c *Client) NewProducer(topic string, opts ProducerOptions) *Producer {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = DefaultRetryMin
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	p := &Producer{c: c, topic: topic, opts: opts, clock: opts.Clock}
	p.rr.Store(rand.Uint64N(1 << 16)) // spread producers over the queues, as RocketMQ does
	return p
}

// Topic is the producer's topic.
func (p *Producer) Topic() string { return p.topic }

// Next returns the next writable queue in round-robin order.
func (p *Producer) Next(ctx context.Context) (Queue, error) {
	qs, err := p.Queues(ctx)
	if err != nil {
		return Queue{}, err
	}
	if len(qs) == 0 {
		return Queue{}, fmt.Errorf("%w: %q", ErrNoQueues, p.topic)
	}
	return qs[(p.rr.Add(1)-1)%uint64(len(qs))], nil
}

// ForKey returns the queue sharding key key maps to: the queue the daemon's
// GET /v1/topics/{topic}/route?key=K names for the same route, by the same function (RocketMQ's
// SelectMessageQueueByHash), so messages with one key stay in one queue, in order, for as long
// as the topic's write queues do not change.
func (p *Producer) ForKey(ctx context.Context, key string) (Queue, error) {
	qs, err := p.Queues(ctx)
	if err != nil {
		return Queue{}, err
	}
	q, ok := route.ShardQueue(qs, key)
	if !ok {
		return Queue{}, fmt.Errorf("%w: %q", ErrNoQueues, p.topic)
	}
	return q, nil
}

// Invalidate marks the route stale, so the next call fetches it again: call it when sending to
// a queue failed, as the topic's brokers may have changed.
func (p *Producer) Invalidate() {
	p.mu.Lock()
	p.stale = true
	p.retryAt = time.Time{}
	p.mu.Unlock()
}

// Refresh fetches the route now.
func (p *Producer) Refresh(ctx context.Context) error {
	p.Invalidate()
	_, err := p.Queues(ctx)
	return err
}

// Queues returns the topic's writable queues from the cache, fetching them first when the
// cache is empty, old or invalidated. When a fetch fails, the cached route is returned if there
// is one (unless the daemon says the topic is gone), and the fetch is retried with backoff.
// The slice must not be modified.
func (p *Producer) Queues(ctx context.Context) ([]Queue, error) {
	p.mu.Lock()
	for {
		now := p.clock.Now()
		due := !p.have || p.stale || now.Sub(p.fetched) >= p.opts.RefreshInterval
		if !due || now.Before(p.retryAt) {
			if p.have {
				qs := p.queues
				p.mu.Unlock()
				return qs, nil
			}
			err := p.lastErr
			p.mu.Unlock()
			return nil, err
		}
		if p.inflight != nil {
			if p.have {
				qs := p.queues // someone is refreshing; do not wait for them
				p.mu.Unlock()
				return qs, nil
			}
			ch := p.inflight
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// Look again: a failed fetch has set retryAt, unless its caller gave up, in which
			// case this one fetches.
			p.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		p.inflight = ch
		p.mu.Unlock()
		r, err := p.c.GetRoute(ctx, p.topic)
		p.mu.Lock()
		p.inflight = nil
		close(ch)
		if err == nil {
			p.queues, p.have, p.fetched, p.stale = slices.Clip(r.Queues), true, p.clock.Now(), false
			if p.queues == nil {
				p.queues = []Queue{}
			}
			p.failures, p.retryAt, p.lastErr = 0, time.Time{}, nil
			qs := p.queues
			p.mu.Unlock()
			return qs, nil
		}
		p.lastErr = err
		if IsNotFound(err) {
			p.queues, p.have = nil, false // the topic is gone: sending to its queues is wrong
		}
		if ctx.Err() == nil {
			p.failures++
			d := p.opts.RetryMin
			for i := 1; i < p.failures && d < p.opts.RefreshInterval; i++ {
				d *= 2
			}
			p.retryAt = p.clock.Now().Add(min(d, p.opts.RefreshInterval))
		}
		if p.have {
			qs := p.queues
			p.mu.Unlock()
			return qs, nil
		}
		p.mu.Unlock()
		return nil, err
	}
}
