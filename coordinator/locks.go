package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/lock"
	"github.com/allocd/allocd/route"
	"github.com/allocd/allocd/store"
)

// Ordered consumption: the coordinator keeps the lock table (package lock) of every orderly
// group. A group takes locks when its binding says "orderly": true: queue locks for queue
// delivery, message-group locks for message delivery (clustering groups only: a broadcasting
// member consumes every queue, so there is nothing to lock).
//
// The table is guarded by c.mu like the rest of the model, so its Directory (groups, live
// members, the owner of a queue in the generation in force) reads the model directly, and a
// member's removal releases its locks in the same critical section (locksMemberGone).
//
// # Restarts: persist, not wait out
//
// Every answer waits until the table's snapshot that contains the state it saw is durable in the
// store (bucket "locks"). A restarted daemon restores the snapshot, so it grants nothing that
// overlaps a lease granted before, and its token counter continues where it stopped. Waiting out
// the longest lease instead would stop every ordered consumer for up to 12 h (the longest lease)
// on each restart, and tokens would still have to be persisted. Writes are group-committed:
// syncLocks lets one caller write the latest snapshot while the others queue behind it, and a
// caller whose state is already in a written snapshot returns without writing, so concurrent
// calls share fsyncs. Refusals and checks change nothing and cost no write.
//
// # Preference
//
// When members contend for a free message group, the table asks which member the group's plugin
// prefers. The plugin is called with message-group buckets as its queues: a message group named
// N of topic T is the queue {Topic: T, BrokerName: "", QueueID: b} where b is
// route.ShardQueue's choice for sharding key N among PreferenceBuckets such queues (Java's
// String.hashCode of N modulo PreferenceBuckets, as RocketMQ's SelectMessageQueueByHash), and
// with the members of T's generation in force as its consumers (their keys, labels and
// weights, as for an assignment). One call covers every message group of the topic, the answer
// does not depend on which groups happen to be asked for, and it is computed once per
// generation, lazily, outside the mutex: until it is known, and when the binding has no
// strategy, there is no preference and the first asker wins.

// PreferenceBuckets is how many buckets the message groups of a topic are hashed into when the
// group's plugin is asked which member should own them.
const PreferenceBuckets = 1024

// MaxAttemptsKey is the binding config key that sets a message-based orderly group's
// maxAttempts (lock.DefaultMaxAttempts when absent).
const MaxAttemptsKey = "maxAttempts"

// MaxMessageGroupLen bounds a message group's name, as RocketMQ's maxMessageGroupSize.
const MaxMessageGroupLen = 64

// lockBucket and lockKey are where the lock table's snapshot is stored.
const (
	lockBucket = "locks"
	lockKey    = "table"
)

// lockTickEvery is how often RunLocks ends run-out leases, releases leases whose holders are no
// longer members, and computes wanted preferences.
const lockTickEvery = time.Second

type lockState struct {
	table  *lock.Table              // guarded by c.mu
	owners map[prefKey]*queueOwners // guarded by c.mu
	prefs  map[prefKey]*prefs       // guarded by c.mu
	wake   chan struct{}

	// syncMu lets one caller at a time write a snapshot; durable is the table Version it
	// contained.
	syncMu  sync.Mutex
	durable atomic.Uint64

	calls  *prometheus.CounterVec
	writes prometheus.Histogram
}

type prefKey struct{ group, topic string }

// queueOwners indexes a generation's assignment by queue, so Owner is a map lookup.
type queueOwners struct {
	gen   *store.Generation
	owner map[abi.Queue]string // queue -> member key
}

// prefs is the plugin's preference for the message groups of one (group, topic), for one
// generation.
type prefs struct {
	gen      int64
	strategy string
	version  string
	owners   []string // bucket -> member key; nil until computed
	prev     []string // the previous generation's owners, passed as PrevOwners
	wanted   bool
	running  bool
	retryAt  time.Time
}

// initLocks creates the lock table and restores its snapshot. Called by New.
func (c *Coordinator) initLocks() error {
	ls := &lockState{
		owners: map[prefKey]*queueOwners{}, prefs: map[prefKey]*prefs{},
		wake: make(chan struct{}, 1),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_lock_calls_total", Help: "Lock API calls by operation and result (granted, refused, released, valid, stale, error).",
		}, []string{"op", "result"}),
		writes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "allocd_lock_snapshot_write_seconds", Help: "Time to make the lock table's snapshot durable (one write serves every call waiting for it).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9), // 100 us .. 6.5 s
		}),
	}
	if c.opts.Metrics != nil {
		for _, m := range []prometheus.Collector{ls.calls, ls.writes} {
			if err := c.opts.Metrics.Register(m); err != nil {
				return err
			}
		}
	}
	dir := lockDirectory{c}
	t, err := lock.New(lock.Config{Directory: dir, Preference: dir})
	if err != nil {
		return err
	}
	var raw []byte
	err = c.store.View(func(tx store.Tx) error {
		b, ok, err := tx.Get(lockBucket, lockKey)
		if ok {
			raw = b
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the lock table: %w", err)
	}
	if raw != nil {
		var s lock.Snapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("reading the lock table: %w", err)
		}
		if err := t.Restore(s); err != nil {
			return fmt.Errorf("restoring the lock table: %w", err)
		}
		c.log.Info().Int("leases", len(s.Locks)).Uint64("lastToken", s.LastToken).Msg("lock table restored")
	}
	ls.table = t
	ls.durable.Store(t.Version())
	c.locks = ls
	return nil
}

// checkOrderly checks the lock settings of a binding: orderly only for clustering groups, and a
// valid maxAttempts.
func checkOrderly(b Binding) error {
	if b.Orderly && b.Model == Broadcasting {
		return invalid("orderly is for clustering groups: a broadcasting member consumes every queue, so there is nothing to lock")
	}
	if v, ok := b.Config[MaxAttemptsKey]; ok {
		if _, err := parseMaxAttempts(v); err != nil {
			return err
		}
	}
	return nil
}

func parseMaxAttempts(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, invalid("config %s=%q is not an integer in [1, 1000]", MaxAttemptsKey, v)
	}
	return n, nil
}

// lockDirectory is the coordinator as the lock table's Directory and Preference. Its methods
// run inside table calls, with c.mu held.
type lockDirectory struct{ c *Coordinator }

func (d lockDirectory) Group(name string) (lock.GroupConfig, bool) {
	g := d.c.groups[name]
	if g == nil || !g.cfg.Orderly || g.cfg.Model != Clustering {
		return lock.GroupConfig{}, false
	}
	cfg := lock.GroupConfig{Kind: lock.KindQueue}
	if g.cfg.Delivery == MessageDelivery {
		cfg.Kind = lock.KindMessageGroup
	}
	if v, ok := g.cfg.Config[MaxAttemptsKey]; ok {
		n, err := parseMaxAttempts(v)
		if err != nil {
			n = -1 // refused by PutGroup; the table reports it if it ever gets here
		}
		cfg.MaxAttempts = n
	}
	return cfg, true
}

// Members lists the client ids of the live members, in the order of their keys (the order the
// plugin sees them in).
func (d lockDirectory) Members(name string) []string {
	g := d.c.groups[name]
	if g == nil {
		return nil
	}
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.key, b.key) })
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.cid
	}
	return out
}

// Owner is the live member that the generation in force assigns q to.
func (d lockDirectory) Owner(name string, q lock.Queue) string {
	g := d.c.groups[name]
	if g == nil || q.QueueID > 1<<31-1 {
		return ""
	}
	st := g.topics[q.Topic]
	if st == nil || st.gen == nil {
		return ""
	}
	k := prefKey{name, q.Topic}
	idx := d.c.locks.owners[k]
	if idx == nil || idx.gen != st.gen {
		idx = &queueOwners{gen: st.gen, owner: map[abi.Queue]string{}}
		for key, qs := range st.gen.Assignment {
			for _, aq := range qs {
				idx.owner[aq] = key
			}
		}
		d.c.locks.owners[k] = idx
	}
	key, ok := idx.owner[abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(q.QueueID)}]
	if !ok {
		return ""
	}
	if m := g.keys[key]; m != nil {
		return m.cid
	}
	return ""
}

// Prefer answers from the preference computed for the generation in force, or asks RunLocks
// to compute it and answers "" (no preference) meanwhile.
func (d lockDirectory) Prefer(name string, mg lock.MessageGroup, live []string) string {
	c := d.c
	g := c.groups[name]
	if g == nil || g.cfg.Strategy == "" {
		return ""
	}
	st := g.topics[mg.Topic]
	if st == nil || st.gen == nil {
		return ""
	}
	k := prefKey{name, mg.Topic}
	p := c.locks.prefs[k]
	version := c.plugins[g.cfg.Strategy]
	if p == nil {
		p = &prefs{}
		c.locks.prefs[k] = p
	}
	if p.gen != st.gen.Number || p.strategy != g.cfg.Strategy || p.version != version {
		if p.owners != nil {
			p.prev = p.owners
		}
		p.gen, p.strategy, p.version, p.owners, p.retryAt = st.gen.Number, g.cfg.Strategy, version, nil, time.Time{}
	}
	if p.owners == nil {
		if !p.wanted {
			p.wanted = true
			select {
			case c.locks.wake <- struct{}{}:
			default:
			}
		}
		return ""
	}
	if m := g.keys[p.owners[preferenceBucket(mg.Name)]]; m != nil {
		return m.cid
	}
	return ""
}

// bucketQueues are the stand-in queues of a topic's message groups, in canonical order.
func bucketQueues(topic string) []abi.Queue {
	qs := make([]abi.Queue, PreferenceBuckets)
	for i := range qs {
		qs[i] = abi.Queue{Topic: topic, QueueID: int32(i)}
	}
	return qs
}

// buckets is bucketQueues of no topic, for preferenceBucket.
var buckets = bucketQueues("")

// preferenceBucket is the bucket of message group name: the queue route.ShardQueue picks for it.
func preferenceBucket(name string) int {
	q, _ := route.ShardQueue(buckets, name)
	return int(q.QueueID)
}

// prefJob is one preference computation: the request built under the mutex, run without it.
type prefJob struct {
	k   prefKey
	p   *prefs
	gen int64
	req *abi.Request
}

// computePreferences runs the plugin for every (group, topic) whose preference was asked for
// and is not known for the generation in force.
func (c *Coordinator) computePreferences(ctx context.Context) {
	c.mu.Lock()
	now := c.clock.Now()
	for k := range c.locks.owners {
		if c.groups[k.group] == nil {
			delete(c.locks.owners, k)
		}
	}
	var jobs []prefJob
	for k, p := range c.locks.prefs {
		g := c.groups[k.group]
		if g == nil {
			delete(c.locks.prefs, k)
			continue
		}
		st := g.topics[k.topic]
		if !p.wanted || p.running || p.owners != nil || now.Before(p.retryAt) || st == nil || st.gen == nil || st.gen.Number != p.gen {
			continue
		}
		keys := make([]string, 0, len(st.gen.Assignment))
		for key := range st.gen.Assignment {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		if len(keys) == 0 {
			continue
		}
		attrs := make([]abi.Attrs, len(keys))
		for i, key := range keys {
			if m := g.keys[key]; m != nil {
				attrs[i].Labels = m.labels
				if m.hasWeight {
					attrs[i].Metrics = map[string]int64{WeightLabel: m.weight}
				}
			}
		}
		req := &abi.Request{
			Group: k.group, Queues: bucketQueues(k.topic), Consumers: keys, ConsumerAttrs: attrs,
			Config: g.cfg.Config, PrevOwners: p.prev,
		}
		p.running, p.wanted = true, false
		jobs = append(jobs, prefJob{k: k, p: p, gen: p.gen, req: req})
	}
	c.mu.Unlock()

	for _, j := range jobs {
		result, _, err := c.allocate(ctx, j.p.strategy, j.req)
		c.mu.Lock()
		j.p.running = false
		switch {
		case err != nil:
			j.p.wanted = true
			j.p.retryAt = c.clock.Now().Add(5 * time.Second)
			c.log.Warn().Err(err).Str("group", j.k.group).Str("topic", j.k.topic).
				Msg("message-group preference not computed; the first member to ask gets a free message group")
		case j.p.gen == j.gen && j.p.owners == nil:
			owners := make([]string, PreferenceBuckets)
			for key, qs := range result {
				for _, q := range qs {
					owners[q.QueueID] = key
				}
			}
			j.p.owners = owners
		}
		c.mu.Unlock()
	}
}

// lockCall runs fn on the table under the mutex and returns once the state it saw is durable.
func (c *Coordinator) lockCall(op, group string, fn func(now time.Time) (result string, err error)) error {
	if err := CheckName("group", group); err != nil {
		return err
	}
	c.mu.Lock()
	if c.groups[group] == nil {
		c.mu.Unlock()
		c.locks.calls.WithLabelValues(op, "error").Inc()
		return notFound("group %q not found", group)
	}
	result, err := fn(c.clock.Now())
	v := c.locks.table.Version()
	c.mu.Unlock()
	if serr := c.syncLocks(v); serr != nil {
		c.locks.calls.WithLabelValues(op, "error").Inc()
		return serr
	}
	if err != nil {
		result = "error"
		if errors.As(err, new(*lock.StaleError)) {
			result = "stale"
		}
	}
	c.locks.calls.WithLabelValues(op, result).Inc()
	return lockError(err)
}

// syncLocks returns once a snapshot of version v or later is durable.
func (c *Coordinator) syncLocks(v uint64) error {
	ls := c.locks
	if ls.durable.Load() >= v {
		return nil
	}
	ls.syncMu.Lock()
	defer ls.syncMu.Unlock()
	if ls.durable.Load() >= v {
		return nil // written by the caller ahead in the queue
	}
	start := time.Now()
	c.mu.Lock()
	snap := ls.table.Snapshot()
	sv := ls.table.Version()
	c.mu.Unlock()
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	if err := c.store.Update(func(tx store.Tx) error { return tx.Put(lockBucket, lockKey, b) }); err != nil {
		c.log.Error().Err(err).Msg("the lock table could not be saved; lock calls fail until it can")
		return storage(err, "saving the lock table")
	}
	ls.durable.Store(sv)
	ls.writes.Observe(time.Since(start).Seconds())
	return nil
}

// lockError turns the lock table's errors into the coordinator's.
func lockError(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "lock: ")
	var (
		arg    *lock.ArgError
		lease  *lock.LeaseError
		member *lock.MemberError
	)
	switch {
	case errors.As(err, &arg), errors.As(err, &lease):
		return &Error{Kind: KindInvalid, Msg: msg}
	case errors.As(err, &member):
		return &Error{Kind: KindNotFound, Msg: msg + " (send a heartbeat first)"}
	case errors.As(err, new(*lock.GroupError)), errors.As(err, new(*lock.KindError)), errors.As(err, new(*lock.StaleError)):
		return &Error{Kind: KindConflict, Msg: msg}
	}
	return err
}

// LockQueues grants or renews queue locks of a queue-based orderly group to member cid (see
// lock.Table.LockQueues). lease 0 means lock.DefaultLease.
func (c *Coordinator) LockQueues(group, cid string, queues []lock.Queue, lease time.Duration) (locked []lock.Grant, refused []lock.Refusal, err error) {
	err = c.lockCall("lockQueues", group, func(now time.Time) (string, error) {
		var err error
		locked, refused, err = c.locks.table.LockQueues(now, group, cid, queues, lease)
		if len(locked) == 0 && len(refused) > 0 {
			return "refused", err
		}
		return "granted", err
	})
	return locked, refused, err
}

// UnlockQueues releases those of queues that cid holds, and returns them.
func (c *Coordinator) UnlockQueues(group, cid string, queues []lock.Queue) (unlocked []lock.Queue, err error) {
	err = c.lockCall("unlockQueues", group, func(now time.Time) (string, error) {
		var err error
		unlocked, err = c.locks.table.UnlockQueues(now, group, cid, queues)
		return "released", err
	})
	return unlocked, err
}

// LockMessageGroup grants or renews a message-group lock of a message-based orderly group to
// member cid (see lock.Table.LockMessageGroup). The Refusal is nil on success.
func (c *Coordinator) LockMessageGroup(group, cid string, mg lock.MessageGroup, lease time.Duration) (grant lock.Grant, refusal *lock.Refusal, err error) {
	err = c.lockCall("lockMessageGroup", group, func(now time.Time) (string, error) {
		var err error
		grant, refusal, err = c.locks.table.LockMessageGroup(now, group, cid, mg, lease)
		if refusal != nil {
			return "refused", err
		}
		return "granted", err
	})
	return grant, refusal, err
}

// ReleaseMessageGroup ends cid's hold on a message group; a token that is not cid's live grant
// is refused with a KindConflict error.
func (c *Coordinator) ReleaseMessageGroup(group, cid string, mg lock.MessageGroup, token uint64, outcome lock.Outcome) error {
	return c.lockCall("releaseMessageGroup", group, func(now time.Time) (string, error) {
		return "released", c.locks.table.ReleaseMessageGroup(now, group, cid, mg, token, outcome)
	})
}

// LockCheck is the answer of CheckLock.
type LockCheck struct {
	// Valid reports that the token holds the lock now.
	Valid bool `json:"valid"`
	// Holder is, when the token is not valid, the member holding the lock now ("" when it is
	// free).
	Holder string `json:"holder,omitempty"`
}

// CheckLock reports whether token still holds lock l of group, so that a broker or an offset
// store can refuse a stale holder's commit.
func (c *Coordinator) CheckLock(group string, l lock.Lock, token uint64) (LockCheck, error) {
	var res LockCheck
	err := c.lockCall("check", group, func(now time.Time) (string, error) {
		err := c.locks.table.Check(now, group, l, token)
		var stale *lock.StaleError
		switch {
		case err == nil:
			res = LockCheck{Valid: true}
			return "valid", nil
		case errors.As(err, &stale):
			res = LockCheck{Holder: stale.Holder}
			return "stale", nil
		}
		return "", err
	})
	return res, err
}

// Leases lists the live leases of a group.
func (c *Coordinator) Leases(group string) ([]lock.Lease, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[group] == nil {
		return nil, notFound("group %q not found", group)
	}
	return c.locks.table.Leases(c.clock.Now(), group), nil
}

// CheckMessageGroup checks a message group's name: 1 to MaxMessageGroupLen bytes of UTF-8
// without control characters, as RocketMQ's proxy requires.
func CheckMessageGroup(name string) error {
	if name == "" {
		return invalid("messageGroup is empty")
	}
	if len(name) > MaxMessageGroupLen {
		return invalid("messageGroup %q is %d bytes long, more than %d", name, len(name), MaxMessageGroupLen)
	}
	return checkText("messageGroup", name)
}

// locksMemberGone releases a departed member's locks at once. Called with c.mu held by every
// path that removes a member.
func (c *Coordinator) locksMemberGone(group, cid string, now time.Time) {
	gone, err := c.locks.table.MemberGone(now, group, cid)
	if err != nil || len(gone) == 0 {
		return
	}
	c.log.Info().Str("group", group).Str("cid", cid).Int("locks", len(gone)).Msg("member gone: its locks are released")
	c.pokeLocks()
}

func (c *Coordinator) pokeLocks() {
	select {
	case c.locks.wake <- struct{}{}:
	default:
	}
}

// TickLocks ends leases that ran out, releases the leases of holders that are not members (a
// member that did not come back after a restart, or a deleted group), makes the result durable,
// and computes the message-group preferences asked for. RunLocks calls it every second; tests
// call it after moving a fake clock.
//
// A lease restored at a restart or a failover whose holder has not come back is released only
// once the holder has stayed away for a session timeout counted from the group's first heartbeat
// to this coordinator, not from its start: until some member of the group has reached it, the
// holder's silence may be the daemon's own absence (a failover under load can outlast the restart
// grace before any heartbeat gets through). A group none of whose members comes back keeps its
// restored leases until they run out.
func (c *Coordinator) TickLocks(ctx context.Context) error {
	c.mu.Lock()
	now := c.clock.Now()
	expired := c.locks.table.Tick(now)
	for _, l := range c.locks.table.Leases(now, "") {
		g := c.groups[l.Group]
		gone := g == nil ||
			g.members[l.Holder] == nil && !g.firstBeat.IsZero() && !now.Before(g.firstBeat.Add(c.opts.SessionTimeout))
		if gone {
			c.locksMemberGone(l.Group, l.Holder, now)
		}
	}
	v := c.locks.table.Version()
	c.mu.Unlock()
	for _, l := range expired {
		c.log.Debug().Str("group", l.Group).Str("lock", l.Lock.String()).Str("holder", l.Holder).
			Uint64("token", l.Token).Msg("lease ran out")
	}
	err := c.syncLocks(v)
	c.computePreferences(ctx)
	return err
}

// RunLocks calls TickLocks every second, and at once when a preference is wanted, until ctx
// ends. A failed snapshot write is logged and retried.
func (c *Coordinator) RunLocks(ctx context.Context) error {
	t := time.NewTicker(lockTickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.locks.wake:
		}
		if err := c.TickLocks(ctx); err != nil {
			c.log.Warn().Err(err).Msg("lock tick")
		}
	}
}
