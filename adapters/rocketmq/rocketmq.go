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
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/plugins/averagely"
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
	// Timeout bounds one computation (2 s): the plugin's call (its deadline,
	// host.Config.Timeout), or with Authoritative each request to the daemon. A computation
	// that finds every instance of the plugin busy waits for the calls ahead of it, each
	// bounded the same.
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
		Host: host.Config{Timeout: cfg.Timeout}, // the plugin's own deadline too
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
// never panics. Where the strategy gives the consumer a run of consecutive queues of mqAll (AVG
// on mqAll sorted as the client sorts it), the answer is that run of mqAll itself, with its
// capacity cut at its end (an append copies): nothing is allocated for it.
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
		var ok bool
		out, ok, err = s.cache.owned(s, group, cid, mqAll, cidAll)
		if err == nil && !ok {
			return nil // not in cidAll: the client's built-ins answer nil too
		}
		if err == nil {
			return out
		}
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
	var last []primitive.MessageQueue
	if s.cache != nil {
		last = s.cache.lastGood(key.group, key.topic, key.cid)
	} else {
		s.mu.Lock()
		last = s.last[key]
		s.mu.Unlock()
	}
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

// groupCache keeps the last whole-group answer per (group, topic): a rebalance asks once per
// consumer with the same mqAll and cidAll, and RocketMQ asks again every 20 s with them
// unchanged most of the time, so one plugin call serves them all. Strategies are deterministic
// (the ABI gives a plugin no clock, randomness or I/O), so the same input and plugin version
// give the same answer.
//
// An entry's fingerprint is the plugin version, mqAll's pointers and cidAll: a hit compares
// mqAll's pointers as one block of memory (a queue whose pointer differs is compared by value,
// so a fresh copy of the same route hits too) and cidAll's string headers the same way (by
// value where they differ). The cache trusts, as rocketmq-client-go's own strategies do, that
// a *MessageQueue in mqAll is not modified in place (the client makes new ones when a route
// changes). Memory: at most maxCached entries, each O(len(mqAll) + len(cidAll)).
type groupCache struct {
	// last is the entry of the latest call, checked before the map: the 64 calls of one
	// rebalance ask for one (group, topic), and a hit then takes no lock.
	last atomic.Pointer[cached]
	mu   sync.Mutex
	m    map[[2]string]*cached
	// avg is AVG's answer for sizes that two misses in a row had, and sizes the latest miss's
	// (avgFor).
	avg   atomic.Pointer[avgAnswer]
	sizes atomic.Uint64
}

// avgAnswer is the answer of RocketMQ's AVG (its default strategy, plugins/averagely) for nq
// queues and n distinct consumers in the owner form, with its runs: consumer i's queues are
// queues start[i] to start[i+1]. An answer found equal to it, in one comparison of memory, takes
// its runs as they are, instead of runsOf's pass over the owners (RATIONALE.md). start is never
// written once built: entries share it.
type avgAnswer struct {
	nq, n  int
	owners []int32
	start  []int32
}

// avgFor returns AVG's answer for nq queues and n consumers, or nil. Building one costs about
// what runsOf does, so it is built only for the sizes of the miss before too: the topics of a
// group whose members changed, or groups of one size, have misses of one size in a row; a
// group whose size changes at every miss pays nothing for it.
func (c *groupCache) avgFor(nq, n int) *avgAnswer {
	if a := c.avg.Load(); a != nil && a.nq == nq && a.n == n {
		return a
	}
	if sizes := uint64(nq)<<32 | uint64(uint32(n)); c.sizes.Swap(sizes) != sizes {
		return nil
	}
	a := &avgAnswer{nq: nq, n: n, owners: make([]int32, nq), start: make([]int32, n+1)}
	averagely.Owners(a.owners, n)
	prev := int32(0)
	for q, o := range a.owners { // AVG's owners never decrease: start[k] is where k's run begins
		for k := prev + 1; k <= o; k++ {
			a.start[k] = int32(q)
		}
		prev = o
	}
	for k := prev + 1; k <= int32(n); k++ {
		a.start[k] = int32(nq)
	}
	c.avg.Store(a)
	return a
}

type cached struct {
	group, topic string
	version      string
	mqAll        []*primitive.MessageQueue // the caller's pointers, in its order
	cidAll       []string                  // in the caller's order
	// sorted is cidAll sorted (cidAll itself where it is, as the client passes it). Consumer
	// sorted[i]'s queues are mqAll[start[i]:start[i+1]] when runs is set (AVG's answer on an
	// mqAll in canonical order: every consumer's queues are consecutive), and otherwise
	// flat[start[i]:start[i+1]], as indices into mqAll in the plugin's order.
	sorted []string
	start  []int32
	flat   []int32
	runs   bool
	// queues is mqAll as the plugin's request holds it, in canonical order, and qperm maps
	// its index to mqAll's (nil: mqAll is canonical already); a miss whose mqAll is this
	// entry's reuses them.
	queues []abi.Queue
	qperm  []int
	// hint is where index last found a cid by its address: a process asks for its own cid,
	// call after call, and a loop over the members asks for the next one.
	hint atomic.Int32
}

// maxCached bounds the cache; past it an arbitrary entry is dropped for each new one.
const maxCached = 1024

// owned returns consumer cid's queues, as pointers of mqAll, or ok false when cid is not in
// cidAll.
func (c *groupCache) owned(s *Strategy, group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) (out []*primitive.MessageQueue, ok bool, err error) {
	v := s.s.Version().Hash
	topic := topicOf(mqAll)
	e := c.last.Load()
	if e == nil || e.group != group || e.topic != topic || !e.answers(v, mqAll, cidAll) {
		c.mu.Lock()
		m := c.m[[2]string{group, topic}]
		c.mu.Unlock()
		if m != nil && m != e && m.answers(v, mqAll, cidAll) {
			e = m
		} else if e, err = c.compute(s, group, topic, m, mqAll, cidAll); err != nil {
			if !slices.Contains(cidAll, cid) {
				return nil, false, nil // nil, as the client's built-ins answer, even if the plugin fails
			}
			return nil, false, err
		}
	}
	i, ok := e.index(cid, cidAll)
	if c.last.Load() != e {
		c.last.Store(e)
	}
	if !ok {
		return nil, false, nil
	}
	from, to := e.start[i], e.start[i+1]
	if e.runs {
		// The caller's own pointers, in place: a run of mqAll, its capacity cut at its end so
		// that an append copies rather than writes into mqAll.
		return mqAll[from:to:to], true, nil
	}
	// The caller's own pointers: a hit by value answers from this mqAll, not the entry's.
	out = make([]*primitive.MessageQueue, to-from)
	for k, q := range e.flat[from:to] {
		out[k] = mqAll[q]
	}
	return out, true, nil
}

// answers reports whether e is the answer of plugin version v to mqAll and cidAll. cidAll is
// compared first: it is an eighth of mqAll's size (64 string headers against 1,024 pointers in a
// rebalance of 64 consumers), and the input that changes from one rebalance to the next is most
// often the consumers, so a miss fails there without reading mqAll (RATIONALE.md).
func (e *cached) answers(v string, mqAll []*primitive.MessageQueue, cidAll []string) bool {
	return e.version == v && sameStrings(cidAll, e.cidAll) && sameQueues(mqAll, e.mqAll)
}

// lastGood returns the last good answer for cid of (group, topic), as values, or nil.
func (c *groupCache) lastGood(group, topic, cid string) []primitive.MessageQueue {
	c.mu.Lock()
	e := c.m[[2]string{group, topic}]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	i, ok := e.index(cid, nil)
	if !ok {
		return nil
	}
	vals := make([]primitive.MessageQueue, 0, e.start[i+1]-e.start[i])
	for k := e.start[i]; k < e.start[i+1]; k++ {
		q := k
		if !e.runs {
			q = e.flat[k]
		}
		vals = append(vals, *e.mqAll[q])
	}
	return vals
}

// compute asks the plugin for the whole group and caches the answer; prev is the entry it
// replaces, whose queues it reuses when mqAll is the same.
func (c *groupCache) compute(s *Strategy, group, topic string, prev *cached, mqAll []*primitive.MessageQueue, cidAll []string) (*cached, error) {
	e := &cached{group: group, topic: topic, cidAll: slices.Clone(cidAll)}
	if prev != nil && sameQueues(mqAll, prev.mqAll) {
		e.mqAll, e.queues, e.qperm = prev.mqAll, prev.queues, prev.qperm
	} else {
		e.mqAll = slices.Clone(mqAll)
		var err error
		if e.queues, e.qperm, err = canonicalQueues(mqAll); err != nil {
			return nil, err
		}
	}
	e.sorted = e.cidAll
	if !slices.IsSorted(cidAll) {
		e.sorted = slices.Clone(cidAll)
		slices.Sort(e.sorted)
	}
	// e.queues is never written once built: the encoder may keep it and know it by its address.
	req := &abi.Request{Group: group, Queues: e.queues, Consumers: e.sorted, Config: s.cfg.Config, QueuesFrozen: true}
	// No deadline of the adapter's own: the host's (Timeout) bounds the call, and a wait for a
	// busy instance lasts as long as the calls ahead of it, each bounded the same; a context
	// with a deadline would cost each miss a timer and a cancellation hook (RATIONALE.md).
	err := s.s.AssignOwnersFunc(context.Background(), req, func(resp *abi.Response, ver strategy.Version) error {
		if resp.Owners != nil {
			var avg *avgAnswer
			if e.qperm == nil { // AVG's runs are of mqAll in canonical order
				avg = c.avgFor(len(resp.Owners), len(e.sorted))
			}
			e.fromOwners(resp.Owners, avg) // read here: they are the instance's memory
		} else {
			e.fromResults(resp.Results)
		}
		e.version = ver.Hash
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[[2]string]*cached{}
	}
	key := [2]string{group, topic}
	if _, ok := c.m[key]; !ok && len(c.m) >= maxCached {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = e
	c.mu.Unlock()
	return e, nil
}

// fromOwners fills start (and flat, unless the answer is runs of mqAll) from an owner-form
// answer: owners[q] is the index in e.sorted of queue q's owner (the first of its id), or
// abi.NoOwner; every consumer's queues are in queue order.
func (e *cached) fromOwners(owners []int32, avg *avgAnswer) {
	n := len(e.sorted)
	if avg != nil && e.qperm == nil && avg.n == n && sameInt32s(owners, avg.owners) {
		e.start, e.runs = avg.start, true // consumer i's queues are mqAll[start[i]:start[i+1]]
		return
	}
	e.start = make([]int32, n+1)
	if e.qperm == nil && e.runsOf(owners) {
		return
	}
	clear(e.start)
	after := e.start[1:]
	for _, o := range owners {
		if o >= 0 {
			after[o]++
		}
	}
	for i := range n {
		after[i] += e.start[i]
	}
	e.flat = make([]int32, e.start[n])
	next := slices.Clone(e.start[:n])
	for q, o := range owners {
		if o >= 0 {
			if e.qperm != nil {
				q = e.qperm[q]
			}
			e.flat[next[o]] = int32(q)
			next[o]++
		}
	}
}

// runsOf reports whether owners never decrease and leave no queue without an owner, as AVG's
// answer does, and then sets start (consumer i's queues are queues start[i] to start[i+1]) and
// runs. It takes a run at a time, as long as the one before it where the queues up to there
// have one owner (one comparison of the run with itself shifted by a queue, in memequal's wide
// loads: AVG's runs are all as long but for the first n mod c, one longer), else up to the
// first queue of another owner, looking at each. A run that goes on past its guess is taken
// as two of one owner, which sets nothing between them.
func (e *cached) runsOf(owners []int32) bool {
	n, nq := int32(len(e.sorted)), len(owners)
	prev, run := int32(0), 0 // the owner of the run before q (0 before the first) and its length
	for q := 0; q < nq; {
		o := owners[q]
		if o < prev || o >= n { // a descent, or NoOwner (-1) (the host checked o < n)
			return false
		}
		for k := prev + 1; k <= o; k++ {
			e.start[k] = int32(q)
		}
		end := q + run
		if run == 0 || end > nq || !sameInt32s(owners[q:end-1], owners[q+1:end]) {
			for end = q + 1; end < nq && owners[end] == o; end++ {
			}
		}
		prev, run, q = o, end-q, end
	}
	for k := prev + 1; k <= n; k++ {
		e.start[k] = int32(nq)
	}
	e.runs = true
	return true
}

// sameInt32s is slices.Equal(a, b), comparing one block of memory.
func sameInt32s(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || sameWords(unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), 4*len(a)))
}

// fromResults fills start and flat from a list-form answer, parallel to e.sorted.
func (e *cached) fromResults(results []abi.Result) {
	e.start = make([]int32, len(results)+1)
	for i, r := range results {
		e.start[i+1] = e.start[i] + int32(len(r.Indices))
	}
	e.flat = make([]int32, 0, e.start[len(results)])
	for _, r := range results {
		for _, q := range r.Indices {
			if e.qperm != nil {
				q = e.qperm[q]
			}
			e.flat = append(e.flat, int32(q))
		}
	}
}

// index returns cid's index in e.sorted (the first of a repeated id, whose answer the plugin's
// checks make every copy's). cidAll, when not nil, is the caller's, equal to e.cidAll. Where it is
// sorted (e.sorted is e.cidAll, as the client passes it) and cid is one of its own strings (the
// same bytes at the same address) at the place where the last such cid was or at the next one,
// as for a process that asks for its own id again and a loop over the members, two string
// headers settle it; otherwise the binary search does.
func (e *cached) index(cid string, cidAll []string) (int, bool) {
	if n := len(cidAll); n == len(e.sorted) && n > 0 && unsafe.SliceData(e.sorted) == unsafe.SliceData(e.cidAll) {
		p, h := unsafe.StringData(cid), int(e.hint.Load())
		for _, i := range [2]int{h, h + 1} {
			if i >= n {
				i = 0
			}
			if c := cidAll[i]; unsafe.StringData(c) == p && len(c) == len(cid) {
				if i != h {
					e.hint.Store(int32(i))
				}
				for i > 0 && e.sorted[i-1] == cid {
					i-- // the first of a repeated id
				}
				return i, true
			}
		}
	}
	return slices.BinarySearch(e.sorted, cid)
}

// canonicalQueues is mqAll as the plugin's request holds it, in canonical order, with the
// permutation back to mqAll's order (nil when mqAll is canonical, as rocketmq-client-go's
// rebalance sorts it). Queues of one run of topic and broker share one copy of the names, so
// the encoder looks each name up once per run.
func canonicalQueues(mqAll []*primitive.MessageQueue) ([]abi.Queue, []int, error) {
	queues := make([]abi.Queue, len(mqAll))
	sorted := true
	for i, q := range mqAll {
		if q == nil {
			return nil, nil, fmt.Errorf("rocketmq: mqAll[%d] is nil", i)
		}
		if q.QueueId < math.MinInt32 || q.QueueId > math.MaxInt32 {
			return nil, nil, fmt.Errorf("rocketmq: mqAll[%d] (%s): queue id out of range", i, q)
		}
		aq := abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: int32(q.QueueId)}
		if i > 0 {
			p := &queues[i-1]
			if aq.Topic == p.Topic {
				aq.Topic = p.Topic
			}
			if aq.BrokerName == p.BrokerName {
				aq.BrokerName = p.BrokerName
			}
			sorted = sorted && abi.CompareQueues(*p, aq) <= 0
		}
		queues[i] = aq
	}
	if sorted {
		return queues, nil, nil
	}
	perm := make([]int, len(queues))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return abi.CompareQueues(queues[a], queues[b]) })
	out := make([]abi.Queue, len(queues))
	for i, j := range perm {
		out[i] = queues[j]
	}
	return out, perm, nil
}

// sameQueues reports whether mqAll holds the same queues as was, in the same order: the same
// pointers (compared as one block of memory), or equal values where a pointer differs.
func sameQueues(mqAll, was []*primitive.MessageQueue) bool {
	if len(mqAll) != len(was) {
		return false
	}
	if len(mqAll) == 0 || sameWords(unsafe.Pointer(&mqAll[0]), unsafe.Pointer(&was[0]), len(mqAll)*int(unsafe.Sizeof(mqAll[0]))) {
		return true
	}
	for i, q := range mqAll {
		if q != was[i] && (q == nil || was[i] == nil || *q != *was[i]) {
			return false
		}
	}
	return true
}

// sameStrings is slices.Equal(a, b), answering from the string headers alone (one block of
// memory) when both share their strings, as repeated calls of one rebalance do.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || sameWords(unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), len(a)*int(unsafe.Sizeof(a[0]))) {
		return true
	}
	return slices.Equal(a, b)
}

// sameWords compares n bytes at a and b (memequal: a fast path for a == b, then wide loads).
func sameWords(a, b unsafe.Pointer, n int) bool {
	return a == b || string(unsafe.Slice((*byte)(a), n)) == string(unsafe.Slice((*byte)(b), n))
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
