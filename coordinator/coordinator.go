package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/store"
)

// Clock tells the time. The daemon uses SystemClock; tests move a fake one and call Tick.
type Clock interface{ Now() time.Time }

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Allocator computes an assignment with the named plugin: the plugin registry, seen through the
// one call the coordinator needs. version identifies the plugin's code that answered (its
// content hash), so a generation records what computed it.
type Allocator interface {
	Allocate(ctx context.Context, plugin string, req *abi.Request) (resp *abi.Response, version string, err error)
}

// OwnerAllocator is an Allocator that can hand back a whole-group answer in the owner form (ABI
// 1.1, ABI.md §5.4: one owner index per queue, resp.Owners, with no per-consumer lists), as
// host.Plugin.AllocateOwners does. The coordinator calls AllocateOwners when its Allocator has it
// and builds the generation's queue lists from the owners itself: the lists Allocate would build
// first, and Validate's owner table, are work the coordinator then throws away (RATIONALE.md).
// An answer may still come in the list form (resp.Owners nil: a plugin that does not speak 1.1,
// or a request its checks refuse); it is read as Allocate's.
type OwnerAllocator interface {
	Allocator
	AllocateOwners(ctx context.Context, plugin string, req *abi.Request) (resp *abi.Response, version string, err error)
}

// Defaults of Options.
const (
	DefaultSessionTimeout = 30 * time.Second
	DefaultDebounce       = 200 * time.Millisecond
	DefaultMaxDelay       = 5 * time.Second
	DefaultMaxRetry       = 30 * time.Second
	// DefaultMaxPendingTopics bounds a group's subscriptions to topics not declared yet: as
	// many as one member may subscribe (MaxTopicsPerMember), so a member started before its
	// topics are declared is never refused, while names made up by a faulty or hostile client
	// cannot grow the daemon's memory without end.
	DefaultMaxPendingTopics = MaxTopicsPerMember
)

// Options set up a Coordinator. Zero durations mean their defaults.
type Options struct {
	// Store keeps topics, groups and generations (required).
	Store store.Store
	// Allocator runs strategy plugins (required).
	Allocator Allocator
	// Clock is SystemClock by default.
	Clock Clock
	// Logger receives membership and generation events.
	Logger zerolog.Logger
	// Metrics, if set, receives the coordinator's metrics.
	Metrics prometheus.Registerer
	// SessionTimeout drops a member that has not sent a heartbeat for this long
	// (DefaultSessionTimeout).
	SessionTimeout time.Duration
	// Debounce is the quiet time after the last change before a (group, topic) is recomputed
	// (DefaultDebounce): changes closer together than this coalesce into one generation.
	Debounce time.Duration
	// MaxDelay bounds how long a stream of changes can postpone a recomputation
	// (DefaultMaxDelay).
	MaxDelay time.Duration
	// RestartGrace is how long, after a restart, a persisted generation waits for its members
	// to come back before a new one is published (SessionTimeout by default; negative: none).
	RestartGrace time.Duration
	// MaxRetry caps the backoff between retries after a plugin or store failure
	// (DefaultMaxRetry).
	MaxRetry time.Duration
	// CheckStrategy, if set, refuses a binding to a strategy that is not a loaded plugin.
	CheckStrategy func(name string) error
	// MaxPendingTopics bounds, per group, the topics its members subscribe to that are not
	// declared (DefaultMaxPendingTopics); a heartbeat that would pass it is refused.
	MaxPendingTopics int
	// HistoryLimit and HistoryMaxAge bound the generation history kept per (group, topic)
	// (DefaultHistoryLimit, DefaultHistoryMaxAge; negative: no bound).
	HistoryLimit  int
	HistoryMaxAge time.Duration
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.MaxDelay < o.Debounce {
		o.MaxDelay = o.Debounce
	}
	if o.RestartGrace == 0 {
		o.RestartGrace = o.SessionTimeout
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = DefaultMaxRetry
	}
	if o.MaxPendingTopics <= 0 {
		o.MaxPendingTopics = DefaultMaxPendingTopics
	}
	if o.HistoryLimit == 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	if o.HistoryMaxAge == 0 {
		o.HistoryMaxAge = DefaultHistoryMaxAge
	}
	return o
}

// Coordinator holds the model and computes generations. Its methods are safe for concurrent use.
type Coordinator struct {
	opts  Options
	clock Clock
	store store.Store
	log   zerolog.Logger
	m     *metrics

	hold holdScratch    // holdBack's working arrays (under mu)
	hist historyScratch // the history records' packers and buffers (under mu)

	tickMu sync.Mutex // one Tick at a time

	mu         sync.Mutex
	topics     map[string]Topic
	readLists  map[string]*readList // topic name -> its read queues, while its brokers stay (rebalance.go)
	groups     map[string]*group
	plugins    map[string]string // plugin name -> version last announced or seen
	graceUntil time.Time
	closed     bool
	done       chan struct{}
	wake       chan struct{} // poked when work is scheduled, for Run
	as         autoscaler    // auto-scaled topics (autoscale.go)
	locks      *lockState    // ordered-consumption locks (locks.go)
}

// group is a consumer group's live state.
type group struct {
	cfg     Group
	members map[string]*member // by client id
	keys    map[string]*member // by key: instance id, or client id
	// byKey is every member of members in key order, kept so as members join and go
	// (addMember, deleteMember): a snapshot of 10,000 members filters it rather than sorting
	// them again (RATIONALE.md, "Why a group keeps its members in key order").
	byKey  []*member
	fenced map[string]fence // client ids replaced by a restarted static member
	// departed says why member keys left, for the history's triggers (history.go).
	departed map[string]departure
	topics   map[string]*topicState
	// changed is closed and replaced whenever one of the group's generations changes.
	changed chan struct{}
	// firstBeat is when this coordinator answered the group's first heartbeat (zero until
	// then): members' absence is judged only from when some member could reach it.
	firstBeat time.Time
}

type fence struct {
	by     string
	at     time.Time
	reason string // why, when not replaced by another member
}

type member struct {
	cid, instance, key string
	topics             []string // sorted, unique
	labels             map[string]string
	weight             int64
	hasWeight          bool
	lastSeen           time.Time
	applied            map[string]int64
	confirms           bool // it confirms revocations (handoff.go)
}

// topicState is one (group, topic): its generation and what is pending for it.
type topicState struct {
	name string
	// queuesPrint is the inputs' hash of the last snapshot, up to its queues (rebalance.go).
	queuesPrint *queuesPrint
	// owners are the owners of the last generation a history entry was made for (history.go).
	owners *slotOwners
	// gen is the generation in force; nil before the first. Its maps and slices are never
	// modified after it is installed, except CIDs under the mutex, so readers share them.
	gen *store.Generation
	// dirty: an input may have changed since gen was computed.
	dirty                  bool
	firstDirty, lastChange time.Time
	seq                    uint64 // counts input changes, so Tick knows a result is stale
	computing              bool
	persist                bool // gen.CIDs changed in memory and is not yet stored
	failures               int
	retryAt                time.Time
	lastErr                string
	lastErrAt              time.Time
	ho                     handoffState // handoff.go
	// deadline is the earliest deadline of deadlineOf's handoffs (handoffDeadline), found once
	// per generation: a Tick need not walk 50,000 handoffs to learn nothing is due.
	deadlineOf      *store.Generation
	deadline, first time.Time // handoffDeadline's, and the earliest of all (a zero one counts)
	// offsets are the last offsets the owners reported per queue (lag.go).
	offsets map[abi.Queue]lagReport
}

// New loads the model from the store. If the store held generations, the restart grace starts
// now.
func New(opts Options) (*Coordinator, error) {
	if opts.Store == nil || opts.Allocator == nil {
		return nil, errors.New("coordinator: Options.Store and Options.Allocator are required")
	}
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		opts: opts, clock: opts.Clock, store: opts.Store, log: opts.Logger, m: m,
		topics: map[string]Topic{}, groups: map[string]*group{}, plugins: map[string]string{},
		done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	if err := c.initLocks(); err != nil {
		return nil, err
	}
	topics, err := c.store.ListTopics()
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		c.topics[t.Name] = t
	}
	groups, err := c.store.ListGroups()
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		c.groups[g.Name] = newGroup(g)
		c.m.members.WithLabelValues(g.Name).Set(0)
	}
	gens, err := c.store.ListGenerations()
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	loaded := 0
	for _, gen := range gens {
		g := c.groups[gen.Group]
		if g == nil {
			continue
		}
		st := g.state(gen.Topic)
		st.gen = &gen
		if st.gen.CIDs == nil {
			st.gen.CIDs = map[string]string{}
		}
		st.ho.load(st.gen)
		st.markDirty(now)
		c.m.generation.WithLabelValues(gen.Group, gen.Topic).Set(float64(gen.Number))
		loaded++
	}
	if loaded > 0 && opts.RestartGrace > 0 {
		c.graceUntil = now.Add(opts.RestartGrace)
	}
	if err := c.loadAutoscale(now); err != nil {
		return nil, err
	}
	ev := c.log.Info().Int("topics", len(topics)).Int("groups", len(groups)).Int("generations", loaded)
	if !c.graceUntil.IsZero() {
		ev = ev.Time("restartGraceUntil", c.graceUntil)
	}
	ev.Msg("coordinator state loaded")
	return c, nil
}

func newGroup(cfg Group) *group {
	return &group{
		cfg: cfg, members: map[string]*member{}, keys: map[string]*member{}, fenced: map[string]fence{},
		topics: map[string]*topicState{}, changed: make(chan struct{}),
	}
}

func (g *group) state(topic string) *topicState {
	st := g.topics[topic]
	if st == nil {
		st = &topicState{name: topic}
		g.topics[topic] = st
	}
	return st
}

// pending reports whether st is a subscription waiting for its topic to be declared: no topic
// of that name, and no generation ever published. Such a state lives in memory only: it is
// not computed, not stored, and it goes with its last subscriber (dropPending).
func (c *Coordinator) pending(st *topicState) bool {
	_, declared := c.topics[st.name]
	return !declared && st.gen == nil
}

// dropPending forgets the pending states among topics that no member subscribes to any more.
func (c *Coordinator) dropPending(g *group, topics []string) {
	for _, t := range topics {
		st := g.topics[t]
		if st == nil || !c.pending(st) || st.computing || len(g.sortedMembers(t)) > 0 {
			continue
		}
		delete(g.topics, t)
	}
}

// checkPending refuses a subscription to topics that would take the group past
// MaxPendingTopics subscriptions to undeclared topics.
func (c *Coordinator) checkPending(g *group, topics []string) error {
	added := 0
	for _, t := range topics {
		if _, declared := c.topics[t]; !declared && g.topics[t] == nil {
			added++
		}
	}
	if added == 0 { // the common heartbeat: nothing new
		return nil
	}
	n := 0
	for _, st := range g.topics {
		if c.pending(st) {
			n++
		}
	}
	if n+added > c.opts.MaxPendingTopics {
		return conflict("group %q would have %d subscriptions to topics that are not declared, more than the limit of %d: declare the topics first (PUT /v1/topics/NAME) or subscribe to fewer",
			g.cfg.Name, n+added, c.opts.MaxPendingTopics)
	}
	return nil
}

// notify wakes the group's long-polls.
func (g *group) notify() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (st *topicState) markDirty(now time.Time) {
	if !st.dirty {
		st.dirty = true
		st.firstDirty = now
	}
	st.lastChange = now
	st.seq++
	st.retryAt = time.Time{} // new inputs deserve a prompt try
}

// due is when a dirty state should be recomputed: a quiet Debounce after its last change, but
// no later than MaxDelay after its first, and not before a retry's backoff.
func (st *topicState) due(o *Options) time.Time {
	t := st.lastChange.Add(o.Debounce)
	if limit := st.firstDirty.Add(o.MaxDelay); limit.Before(t) {
		t = limit
	}
	if st.retryAt.After(t) {
		t = st.retryAt
	}
	return t
}

// touch marks the given topics of g dirty.
func (c *Coordinator) touch(g *group, now time.Time, topics ...string) {
	for _, t := range topics {
		g.state(t).markDirty(now)
	}
	if len(topics) > 0 {
		c.poke()
	}
}

func (c *Coordinator) touchAll(g *group, now time.Time) {
	for _, st := range g.topics {
		st.markDirty(now)
	}
	c.poke()
}

func (c *Coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close closes Done, which wakes every long-poll. It does not close the store.
func (c *Coordinator) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
}

// Done is closed when the coordinator closes.
func (c *Coordinator) Done() <-chan struct{} { return c.done }

// Grace reports the end of the restart grace and whether it is still running.
func (c *Coordinator) Grace() (until time.Time, active bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.graceUntil, c.clock.Now().Before(c.graceUntil)
}

// SessionTimeout is the configured session timeout.
func (c *Coordinator) SessionTimeout() time.Duration { return c.opts.SessionTimeout }

// PutTopic creates or replaces a topic, without an autoscale policy (see PutTopicAutoscale). It
// reports whether the topic is new. Groups consuming it are recomputed when its read queues
// changed.
func (c *Coordinator) PutTopic(name string, brokers []Broker) (Topic, bool, error) {
	return c.PutTopicAutoscale(name, brokers, nil)
}

// DeleteTopic removes a topic. Members subscribed to it keep their subscription and get no
// queues until it comes back.
func (c *Coordinator) DeleteTopic(name string) error {
	if err := CheckName("topic", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return notFound("topic %q not found", name)
	}
	if err := c.deleteTopicRecord(name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return storage(err, "deleting topic %q", name)
	}
	delete(c.topics, name)
	delete(c.readLists, name)
	c.topicChanged(name)
	c.log.Info().Str("topic", name).Msg("topic deleted")
	return nil
}

func (c *Coordinator) topicChanged(name string) {
	now := c.clock.Now()
	for _, g := range c.groups {
		if st, ok := g.topics[name]; ok {
			st.markDirty(now)
			c.poke()
		}
	}
}

// Topic returns a topic.
func (c *Coordinator) Topic(name string) (Topic, error) {
	if err := CheckName("topic", name); err != nil {
		return Topic{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return Topic{}, notFound("topic %q not found", name)
	}
	return t, nil
}

// Topics returns every topic, sorted by name.
func (c *Coordinator) Topics() []Topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Topic, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PutGroup creates a group or replaces its binding. It reports whether the group is new. A
// changed binding recomputes the group's generations.
func (c *Coordinator) PutGroup(name string, b Binding) (Group, bool, error) {
	if err := CheckName("group", name); err != nil {
		return Group{}, false, err
	}
	b, err := normalizeBinding(b)
	if err != nil {
		return Group{}, false, err
	}
	if b.Strategy != "" && c.opts.CheckStrategy != nil {
		if err := c.opts.CheckStrategy(b.Strategy); err != nil {
			return Group{}, false, invalid("strategy %q: %v", b.Strategy, err)
		}
	}
	cfg := Group{Name: name, Binding: b}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, exists := c.groups[name]
	if exists && equalBinding(g.cfg.Binding, b) {
		return g.cfg, false, nil
	}
	if err := c.store.PutGroup(cfg); err != nil {
		return Group{}, false, storage(err, "saving group %q", name)
	}
	if exists {
		g.cfg = cfg
		c.touchAll(g, c.clock.Now())
	} else {
		c.groups[name] = newGroup(cfg)
		c.m.members.WithLabelValues(name).Set(0)
	}
	c.log.Info().Str("group", name).Str("strategy", b.Strategy).Str("model", string(b.Model)).
		Str("delivery", string(b.Delivery)).Bool("created", !exists).Msg("group saved")
	return cfg, !exists, nil
}

// DeleteGroup removes a group, its members and its generations, and wakes its long-polls.
func (c *Coordinator) DeleteGroup(name string) error {
	if err := CheckName("group", name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[name]
	if !ok {
		return notFound("group %q not found", name)
	}
	if err := c.store.DeleteGroup(name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return storage(err, "deleting group %q", name)
	}
	delete(c.groups, name)
	c.deleteHistory(name)
	g.notify()
	c.m.forgetGroup(name, g)
	c.log.Info().Str("group", name).Msg("group deleted")
	return nil
}

// StrategyInUse reports whether some group is bound to the named plugin.
func (c *Coordinator) StrategyInUse(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.groups {
		if g.cfg.Strategy == name {
			return true
		}
	}
	return false
}

// PluginChanged tells the coordinator that a plugin was loaded, reloaded or removed (version
// ""). Groups bound to it are recomputed when the version differs from the one they were
// computed with.
func (c *Coordinator) PluginChanged(name, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.plugins[name]; ok && old == version {
		return
	}
	if version == "" {
		delete(c.plugins, name)
	} else {
		c.plugins[name] = version
	}
	now := c.clock.Now()
	for _, g := range c.groups {
		if g.cfg.Strategy == name && usesPlugin(g.cfg.Binding) {
			c.touchAll(g, now)
		}
	}
}

// Route returns the queues producers may send to for a topic: its writable queues in canonical
// order, the list route.ShardQueue picks from.
func (c *Coordinator) Route(topic string) ([]abi.Queue, error) {
	t, err := c.Topic(topic)
	if err != nil {
		return nil, err
	}
	return WriteQueues(t), nil
}
