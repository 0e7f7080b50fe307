// Package rocketmq runs allocd strategies inside rocketmq-client-go consumers: a Strategy's
// Allocate has the shape of consumer.AllocateStrategy, so a push or pull consumer takes it with
// consumer.WithStrategy(s.Allocate).
//
// Locally (the default) every consumer computes the group's assignment with the plugin, from a
// watched .wasm file or from a daemon's module (see package strategy); with Authoritative, each
// consumer joins the daemon's group under its RocketMQ client id and returns the daemon's
// assignment, one allocator for a mixed fleet.
//
// rocketmq-client-go drops every queue of a topic when a strategy returns nil or an empty list,
// and stops rebalancing for good when a strategy panics. So Allocate never panics, and on any
// failure (the plugin traps, the daemon is unreachable) it returns its last good answer for the
// topic, and says so in the log and through Config.OnError.
package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/strategy"
)

// Config says which strategy to run.
type Config struct {
	// PluginFile is a .wasm file, watched and hot-reloaded.
	PluginFile string
	// Daemon is an allocd daemon's base URL, and Strategy the plugin's name there: the module
	// is fetched from the daemon, checked, cached on disk and followed (Authoritative false),
	// or Strategy is ignored and the daemon's binding of the group decides (Authoritative).
	Daemon   string
	Strategy string
	// Config is the binding's config, e.g. {"vnodes": "10"}.
	Config map[string]string
	// Labels are this consumer's labels (zone, weight). RocketMQ tells a consumer only the
	// other members' client ids, so labels reach the strategy only with Authoritative.
	Labels map[string]string
	// Authoritative makes each consumer join the daemon's group under its RocketMQ client id
	// and return the daemon's assignment, instead of computing one locally.
	Authoritative bool
	// CacheDir keeps compiled plugins and the daemon's last good module (strategy.Config).
	CacheDir string
	// Logger receives failures and reloads; OnError, when set, hears every failed Allocate.
	Logger  zerolog.Logger
	OnError func(error)
	// Timeout bounds one computation (2 s).
	Timeout time.Duration
}

// Strategy is an allocd strategy as a RocketMQ allocation strategy. Safe for concurrent use.
type Strategy struct {
	cfg   Config
	s     *strategy.Strategy // nil when Authoritative
	log   zerolog.Logger
	auth  *authority
	mu    sync.Mutex
	last  map[topicKey][]primitive.MessageQueue // last good answer per (group, topic, cid)
	cache *groupCache
}

type topicKey struct{ group, topic, cid string }

// NewStrategy loads the strategy (or, with Authoritative, checks the configuration) and returns
// once it can answer.
func NewStrategy(ctx context.Context, cfg Config) (*Strategy, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	st := &Strategy{cfg: cfg, log: cfg.Logger.With().Str("component", "allocd-rocketmq").Logger(), last: map[topicKey][]primitive.MessageQueue{}}
	if cfg.Authoritative {
		if cfg.Daemon == "" {
			return nil, errors.New("rocketmq: Authoritative needs Config.Daemon")
		}
		if cfg.PluginFile != "" {
			return nil, errors.New("rocketmq: Authoritative takes the daemon's binding; leave PluginFile empty")
		}
		st.auth = newAuthority(cfg)
		return st, nil
	}
	s, err := strategy.Open(ctx, strategy.Config{
		File: cfg.PluginFile, Daemon: cfg.Daemon, Name: cfg.Strategy, CacheDir: cfg.CacheDir, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("rocketmq: %w", err)
	}
	st.s = s
	st.cache = &groupCache{}
	return st, nil
}

// Close releases the plugin (or leaves the daemon's groups).
func (s *Strategy) Close() error {
	if s.auth != nil {
		return s.auth.close()
	}
	return s.s.Close()
}

// Allocate returns the queues of mqAll that consumer cid owns among cidAll, as the caller's own
// pointers from mqAll in the strategy's order. Where rocketmq-client-go's built-ins return nil
// (an empty cid, mqAll or cidAll, a cid not in cidAll) it returns nil too; on a failure it
// returns the last good answer for the topic (an empty, non-nil list before the first), and it
// never panics.
func (s *Strategy) Allocate(group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) (out []*primitive.MessageQueue) {
	if cid == "" || len(mqAll) == 0 || len(cidAll) == 0 {
		return nil
	}
	key := topicKey{group, topicOf(mqAll), cid}
	defer func() {
		if x := recover(); x != nil {
			out = s.fail(key, mqAll, fmt.Errorf("rocketmq: allocate panicked: %v", x))
		}
	}()
	var (
		owned []int
		err   error
	)
	if s.auth != nil {
		var ok bool
		owned, ok, err = s.auth.allocate(group, cid, mqAll, s.cfg.Timeout)
		if err == nil && !ok {
			return nil // the daemon does not count this consumer as a member
		}
	} else {
		self := slices.Index(cidAll, cid)
		if self < 0 {
			return nil
		}
		owned, err = s.cache.owned(s, group, mqAll, cidAll, self)
	}
	if err != nil {
		return s.fail(key, mqAll, err)
	}
	out = make([]*primitive.MessageQueue, len(owned))
	for i, q := range owned {
		out[i] = mqAll[q]
	}
	s.remember(key, out)
	return out
}

func topicOf(mqAll []*primitive.MessageQueue) string {
	if mqAll[0] == nil {
		return ""
	}
	return mqAll[0].Topic
}

func (s *Strategy) remember(key topicKey, out []*primitive.MessageQueue) {
	vals := make([]primitive.MessageQueue, len(out))
	for i, q := range out {
		vals[i] = *q
	}
	s.mu.Lock()
	s.last[key] = vals
	s.mu.Unlock()
}

// fail reports err and returns the last good answer for key, as the queues of mqAll that are
// still there.
func (s *Strategy) fail(key topicKey, mqAll []*primitive.MessageQueue, err error) []*primitive.MessageQueue {
	s.mu.Lock()
	last := s.last[key]
	s.mu.Unlock()
	out := make([]*primitive.MessageQueue, 0, len(last))
	for _, want := range last {
		for _, q := range mqAll {
			if q != nil && *q == want {
				out = append(out, q)
				break
			}
		}
	}
	s.log.Error().Err(err).Str("group", key.group).Str("topic", key.topic).Str("cid", key.cid).
		Int("kept", len(out)).Msg("allocation failed; keeping the last good assignment")
	if s.cfg.OnError != nil {
		s.cfg.OnError(err)
	}
	return out
}

// groupCache keeps the last whole-group answer per group and topic: RocketMQ asks every 20 s
// with the same mqAll and cidAll most of the time, and a process with several consumers asks
// once per consumer, so one plugin call serves them all. Strategies are deterministic (the ABI
// gives a plugin no clock, randomness or I/O), so the same input and version give the same
// answer.
type groupCache struct {
	mu sync.Mutex
	m  map[[2]string]*cached
}

type cached struct {
	version string
	mqAll   []*primitive.MessageQueue
	queues  []primitive.MessageQueue
	cidAll  []string
	answer  [][]int
}

// maxCached bounds the cache: past it, the oldest answers are not worth keeping track of.
const maxCached = 1024

func (c *groupCache) owned(s *Strategy, group string, mqAll []*primitive.MessageQueue, cidAll []string, self int) ([]int, error) {
	v := s.s.Version().Hash
	key := [2]string{group, topicOf(mqAll)}
	c.mu.Lock()
	if e := c.m[key]; e != nil && e.hit(v, mqAll, cidAll) {
		o := e.answer[self]
		c.mu.Unlock()
		return o, nil
	}
	c.mu.Unlock()
	g := &strategy.Group{Name: group, Config: s.cfg.Config, Queues: make([]strategy.Queue, len(mqAll)), Consumers: make([]strategy.Consumer, len(cidAll))}
	e := &cached{mqAll: slices.Clone(mqAll), queues: make([]primitive.MessageQueue, len(mqAll)), cidAll: slices.Clone(cidAll)}
	for i, q := range mqAll {
		if q == nil {
			return nil, fmt.Errorf("rocketmq: mqAll[%d] is nil", i)
		}
		e.queues[i] = *q
		g.Queues[i] = strategy.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(q.QueueId)}
	}
	for i, id := range cidAll {
		g.Consumers[i] = strategy.Consumer{ID: id}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	a, err := s.s.Assign(ctx, g)
	cancel()
	if err != nil {
		return nil, err
	}
	e.version, e.answer = a.Version.Hash, a.Owned
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[[2]string]*cached{}
	}
	c.m[key] = e
	c.mu.Unlock()
	return a.Owned[self], nil
}

// hit reports whether the cached answer is for this input: pointers are compared first, and
// the queues' values where a pointer differs.
func (e *cached) hit(version string, mqAll []*primitive.MessageQueue, cidAll []string) bool {
	if version != e.version || len(mqAll) != len(e.mqAll) || !slices.Equal(cidAll, e.cidAll) {
		return false
	}
	for i, q := range mqAll {
		if q != e.mqAll[i] && (q == nil || *q != e.queues[i]) {
			return false
		}
	}
	return true
}

// authority answers from the daemon: one member per (group, cid), joined on first use.
type authority struct {
	cfg     Config
	c       *client.Client
	mu      sync.Mutex
	members map[[2]string]*member
}

type member struct {
	cons   *client.Consumer
	topics []string
}

func newAuthority(cfg Config) *authority {
	return &authority{cfg: cfg, c: client.New(cfg.Daemon), members: map[[2]string]*member{}}
}

// allocate returns the daemon's assignment of mqAll's topic to cid as indices into mqAll. ok is
// false when the daemon gives cid no assignment of the topic.
func (a *authority) allocate(group, cid string, mqAll []*primitive.MessageQueue, timeout time.Duration) ([]int, bool, error) {
	topic := topicOf(mqAll)
	cons, err := a.join(group, cid, topic, timeout)
	if err != nil {
		return nil, false, err
	}
	asg, ok := cons.Current(topic)
	if !ok {
		return nil, false, fmt.Errorf("rocketmq: the daemon has no assignment of %q for %s yet", topic, cid)
	}
	owned := make([]int, 0, len(asg.Queues))
	for _, q := range asg.Queues {
		for i, mq := range mqAll {
			if mq != nil && mq.Topic == q.Topic && mq.BrokerName == q.BrokerName && mq.QueueId == int(q.QueueID) {
				owned = append(owned, i)
				break
			}
		}
	}
	return owned, true, nil
}

// join returns the member cid of group, subscribed to topic: a new topic rejoins it with the
// topics it had plus this one.
func (a *authority) join(group, cid, topic string, timeout time.Duration) (*client.Consumer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := [2]string{group, cid}
	m := a.members[key]
	if m != nil && slices.Contains(m.topics, topic) {
		return m.cons, nil
	}
	topics := []string{topic}
	if m != nil {
		topics = append(slices.Clone(m.topics), topic)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		m.cons.Close(ctx)
		cancel()
	}
	cons := a.c.NewConsumer(group, cid, topics, client.ConsumerOptions{Labels: a.cfg.Labels})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cons.Start(ctx); err != nil {
		delete(a.members, key)
		return nil, fmt.Errorf("rocketmq: joining group %q at %s: %w", group, a.cfg.Daemon, err)
	}
	a.members[key] = &member{cons: cons, topics: topics}
	return cons, nil
}

func (a *authority) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for k, m := range a.members {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, m.cons.Close(ctx))
		cancel()
		delete(a.members, k)
	}
	return errors.Join(errs...)
}
