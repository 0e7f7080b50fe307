package strategy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/registry"
)

// Queue is one queue (a RocketMQ message queue, a Kafka partition) of a group's assignment.
type Queue struct {
	Topic      string
	BrokerName string // "" where the system has no brokers per queue (Kafka)
	QueueID    int32
	// Labels (such as "zone") and Metrics (such as "lag") reach the plugin as the queue's
	// attributes; nil means none.
	Labels  map[string]string
	Metrics map[string]int64
	// PrevOwner is the consumer id that owned the queue before, "" for none: what a sticky
	// strategy keeps.
	PrevOwner string
}

// Consumer is one member of the group.
type Consumer struct {
	ID string
	// Labels (such as "zone" or "instanceId") and Metrics (such as "weight"); nil means none.
	Labels  map[string]string
	Metrics map[string]int64
}

// Group is one question to a strategy: which consumer owns which queue. The slices may come in
// any order; the plugin sees them in canonical order (abi.Canonicalize) and the answer refers to
// the caller's order.
type Group struct {
	Name      string
	Queues    []Queue
	Consumers []Consumer
	// Config is the binding's configuration, such as {"vnodes": "10"}.
	Config map[string]string
}

// Assignment is a strategy's answer for a whole group.
type Assignment struct {
	// Owned[i] lists the queues Group.Consumers[i] owns, as indices into Group.Queues, in the
	// plugin's order. Every queue has at most one owner (consumers given twice share theirs).
	Owned [][]int
	// Version is the plugin version that answered.
	Version Version
}

// Version identifies a plugin version: its content hash and its self-described version.
type Version = registry.Version

// Event reports a change of the serving version (Loaded, Reloaded), or a version that was
// rejected (Failed: Err says why; the previous version keeps serving).
type Event = registry.Event

// Defaults of Config.
const (
	DefaultPollWait      = 30 * time.Second
	DefaultRetryInterval = 5 * time.Second
)

// Config says where a strategy comes from. Set File, or Daemon and Name.
type Config struct {
	// File is a .wasm file, watched and hot-reloaded. Its plugin name is the file's base name
	// without ".wasm".
	File string
	// Daemon is an allocd daemon's base URL ("http://127.0.0.1:7420"), and Name the plugin's
	// name there.
	Daemon string
	Name   string
	// CacheDir holds the compiled code of modules (CacheDir/wazero, so a restart loads in
	// ~80 ms instead of compiling for 1-2 s) and the last good module fetched from a daemon
	// (CacheDir/modules). "" means os.UserCacheDir()/allocd.
	CacheDir string
	// Host sets the plugin's limits (call deadline, memory, instances); its CacheDir, when
	// empty, is CacheDir/wazero, and its Logger is Logger.
	Host host.Config
	// Validate, when set, runs on every new version after the self-test; an error rejects the
	// version (the daemon passes the harness's quick pass here).
	Validate func(context.Context, *host.Plugin) error
	// OnEvent, when set, hears every change of version and every rejected one, in order, on a
	// goroutine of its own.
	OnEvent func(Event)
	// Logger receives loads, reloads, rejections and the daemon's unreachability.
	Logger zerolog.Logger
	// HTTPClient talks to the daemon (a client with a default transport).
	HTTPClient *http.Client
	// PollWait is how long one long-poll for a new version waits (DefaultPollWait), and
	// RetryInterval how long the client waits after a failed one (DefaultRetryInterval).
	PollWait, RetryInterval time.Duration
}

// Strategy is a loaded strategy. Its methods are safe for concurrent use.
type Strategy struct {
	name   string
	rt     *host.Runtime
	reg    *registry.Registry
	log    zerolog.Logger
	cancel context.CancelFunc
	done   sync.WaitGroup
	once   sync.Once
	err    error
	// queues holds the canonical queue list of the last group asked about that had no queue
	// attributes or previous owners: never modified, so a group with the same queues reuses
	// it, frozen (abi.Request.QueuesFrozen), instead of a copy and a sort check a call.
	queues atomic.Pointer[lastQueues]
	// ids is the same for the consumers: the canonical id list of the last group asked about
	// whose consumers had no attributes, reused by a group with the same consumers.
	ids atomic.Pointer[lastConsumers]
}

// ErrNoVersion is returned (wrapped) when a strategy has no version that may serve.
var ErrNoVersion = errors.New("strategy: no version serving")

// Open loads a strategy and starts watching its source; it returns once a version serves, or
// with an error naming why none can (a missing file, a module that fails its checks, a daemon
// that cannot be reached and no module cached). Close releases it.
func Open(ctx context.Context, cfg Config) (*Strategy, error) {
	switch {
	case cfg.File != "" && cfg.Daemon != "":
		return nil, errors.New("strategy: set Config.File or Config.Daemon, not both")
	case cfg.File == "" && cfg.Daemon == "":
		return nil, errors.New("strategy: set Config.File (a .wasm file) or Config.Daemon and Config.Name")
	case cfg.Daemon != "" && cfg.Name == "":
		return nil, errors.New("strategy: Config.Daemon needs Config.Name, the plugin's name there")
	}
	if cfg.PollWait <= 0 {
		cfg.PollWait = DefaultPollWait
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.CacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cfg.CacheDir = filepath.Join(d, "allocd")
		}
	}
	hc := cfg.Host
	if hc.CacheDir == "" && cfg.CacheDir != "" {
		hc.CacheDir = filepath.Join(cfg.CacheDir, "wazero")
	}
	hc.Logger = cfg.Logger
	rt, err := host.NewRuntime(ctx, hc)
	if err != nil {
		return nil, fmt.Errorf("strategy: %w", err)
	}
	s := &Strategy{rt: rt, log: cfg.Logger.With().Str("component", "strategy").Logger()}
	var dir string
	var d *daemonSource
	if cfg.File != "" {
		abs, err := filepath.Abs(cfg.File)
		if err != nil {
			rt.Close(ctx)
			return nil, fmt.Errorf("strategy: %w", err)
		}
		if !strings.HasSuffix(abs, ".wasm") || filepath.Base(abs) == ".wasm" {
			rt.Close(ctx)
			return nil, fmt.Errorf("strategy: plugin file %s must be named NAME.wasm", abs)
		}
		if _, err := os.Stat(abs); err != nil {
			rt.Close(ctx)
			return nil, fmt.Errorf("strategy: plugin file: %w", err)
		}
		dir, s.name = filepath.Dir(abs), strings.TrimSuffix(filepath.Base(abs), ".wasm")
	} else {
		if cfg.CacheDir == "" {
			rt.Close(ctx)
			return nil, errors.New("strategy: Config.CacheDir is needed to keep a daemon's module (no user cache folder)")
		}
		d = newDaemonSource(cfg, rt, s.log)
		if err := d.prime(ctx); err != nil {
			rt.Close(ctx)
			return nil, err
		}
		dir, s.name = d.dir, cfg.Name
	}
	name := s.name
	reg, err := registry.New(rt, dir, registry.Options{
		Logger:   cfg.Logger,
		Validate: cfg.Validate,
		Only:     func(n string) bool { return n == name },
		// The file stays in use even while it is replaced by a remove and a create: its
		// last good version keeps serving until Close.
		InUse: func(string) bool { return true },
	})
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("strategy: %w", err)
	}
	s.reg = reg
	if st, ok := reg.StatusOf(name); !ok || st.ActiveHash == "" {
		reason := "no such file"
		if ok && st.LastError != "" {
			reason = st.LastError
		}
		reg.Close()
		rt.Close(ctx)
		return nil, fmt.Errorf("%w: plugin %q from %s: %s", ErrNoVersion, name, dir, reason)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	events, unsubscribe := reg.Subscribe()
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		reg.Run(runCtx)
	}()
	go func() {
		defer s.done.Done()
		defer unsubscribe()
		for ev := range events {
			if cfg.OnEvent != nil {
				cfg.OnEvent(ev)
			}
		}
	}()
	if d != nil {
		d.onFailed = func(ev Event) {
			if cfg.OnEvent != nil {
				cfg.OnEvent(ev)
			}
		}
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			d.run(runCtx, s.currentHash)
		}()
	}
	return s, nil
}

// Name is the plugin's name.
func (s *Strategy) Name() string { return s.name }

// Version is the version serving (cheap: no lock is shared with calls or reloads, nothing is
// allocated), or the zero Version when none serves.
func (s *Strategy) Version() Version {
	v, _ := s.reg.VersionOf(s.name)
	return v
}

func (s *Strategy) currentHash() string { return s.Version().Hash }

// Status is the plugin's status as the daemon shows it: the version serving, the last attempt
// and why it failed, call counts.
func (s *Strategy) Status() registry.Status {
	st, _ := s.reg.StatusOf(s.name)
	return st
}

// Close stops watching, waits for the calls in flight and releases the plugin. Later calls
// return the first result.
func (s *Strategy) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.err = s.reg.Close()
		s.done.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.rt.Close(ctx); err != nil && s.err == nil {
			s.err = err
		}
	})
	return s.err
}

// Assign asks the strategy for the whole group's assignment. A plugin that fails, traps,
// overruns its deadline or answers something invalid costs an error; nothing is kept from it.
func (s *Strategy) Assign(ctx context.Context, g *Group) (*Assignment, error) {
	req, qperm, cperm := s.request(g)
	a := &Assignment{Owned: make([][]int, len(g.Consumers))}
	// An owner-form answer (ABI 1.1) is checked and grouped by owner in one pass where the
	// instance holds it (host.Plugin.AllocateOwnerListsFunc), and Owned is sliced from the
	// grouping: neither the owners' copy nor the Response's Results are made (BENCHMARKS.md,
	// "The embedding API on the owner form").
	err := s.assign(ctx, req, func(resp *abi.Response, v Version, flat, bounds []int) error {
		a.Version = v
		if resp.Owners != nil {
			a.fromOwners(req, flat, bounds, qperm, cperm)
			return nil
		}
		a.fromResults(resp.Results, qperm, cperm) // failed results were refused by checkAnswer
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// fromOwners fills a.Owned from an owner-form answer to req, checked and grouped by the host:
// consumer index o's queues are flat[bounds[o]:bounds[o+1]], and every owner is the first index
// of its consumer id. Consumers given twice share their list.
func (a *Assignment) fromOwners(req *abi.Request, flat, bounds, qperm, cperm []int) {
	if qperm != nil {
		for k, q := range flat {
			flat[k] = qperm[q]
		}
	}
	// first is the first index of consumer i's id (req.Consumers is sorted). An index that owns
	// queues is one: the host refuses any other as an owner. Only an index without queues is
	// compared with the id before it.
	first := 0
	for i := range req.Consumers {
		if i > 0 && (bounds[i] != bounds[i+1] || req.Consumers[i] != req.Consumers[i-1]) {
			first = i
		}
		c := i
		if cperm != nil {
			c = cperm[i]
		}
		a.Owned[c] = flat[bounds[first]:bounds[first+1]:bounds[first+1]]
	}
}

// fromResults fills a.Owned from a list-form answer, one result per consumer, none failed.
func (a *Assignment) fromResults(results []abi.Result, qperm, cperm []int) {
	for i, res := range results {
		owned := res.Indices
		if qperm != nil {
			owned = make([]int, len(res.Indices))
			for k, j := range res.Indices {
				owned[k] = qperm[j]
			}
		}
		c := i
		if cperm != nil {
			c = cperm[i]
		}
		a.Owned[c] = owned
	}
}

// AssignRequest is Assign for a caller that builds the plugin's request itself, already in
// canonical order (abi.Canonicalize: queues by topic, broker name and queue id; consumers sorted
// byte-wise), as a client holding sorted inputs can without copying them into a Group first.
// The answer's Results are parallel to req.Consumers and their indices refer to req.Queues. A
// request out of canonical order is refused (the host would sort it into new slices, and the
// caller's indices would no longer mean what it thinks).
func (s *Strategy) AssignRequest(ctx context.Context, req *abi.Request) (*abi.Response, Version, error) {
	queues, consumers := req.Queues, req.Consumers
	resp, v, err := s.reg.Allocate(ctx, s.name, req)
	if err != nil {
		return nil, Version{}, fmt.Errorf("strategy %s: %w", s.name, err)
	}
	return checkAnswer(s.name, req, resp, queues, consumers, v)
}

// AssignOwners is AssignRequest for a caller that reads an owner-form answer itself
// (host.Plugin.AllocateOwners): when the plugin answers in the owner form, the response's Owners
// names, checked, each queue's owner as an index into req.Consumers (the first of its id), or
// abi.NoOwner, and its Results are empty; a list-form answer comes as AssignRequest returns it.
// The request must be in canonical order, as for AssignRequest.
func (s *Strategy) AssignOwners(ctx context.Context, req *abi.Request) (*abi.Response, Version, error) {
	var (
		out *abi.Response
		ver Version
	)
	err := s.AssignOwnersFunc(ctx, req, func(resp *abi.Response, v Version) error {
		out, ver = resp, v // a response of its own; only its Owners are the instance's memory
		if resp.Owners != nil {
			out.Owners = slices.Clone(resp.Owners)
		}
		return nil
	})
	if err != nil {
		return nil, Version{}, err
	}
	return out, ver, nil
}

// AssignOwnersFunc is AssignOwners for a caller that reads the answer at once: use gets the
// checked response while the plugin's instance still holds it, and an owner-form answer's Owners
// are the instance's memory, valid only until use returns (host.Plugin.AllocateOwnersFunc). It
// spares the copy and the allocation of one owner per queue. use's error is returned as it is.
func (s *Strategy) AssignOwnersFunc(ctx context.Context, req *abi.Request, use func(*abi.Response, Version) error) error {
	return s.assign(ctx, req, func(resp *abi.Response, v Version, _, _ []int) error { return use(resp, v) })
}

// assign is AssignOwnersFunc for a caller that wants an owner-form answer grouped by owner as
// well (host.Plugin.AllocateOwnerListsFunc: flat and bounds, nil for a list-form answer).
func (s *Strategy) assign(ctx context.Context, req *abi.Request, use func(resp *abi.Response, v Version, flat, bounds []int) error) error {
	queues, consumers := req.Queues, req.Consumers
	p, release, err := s.reg.Acquire(s.name)
	if err != nil {
		return fmt.Errorf("strategy %s: %w", s.name, err)
	}
	defer release()
	v := Version{Hash: p.Hash(), Version: p.Info().Version}
	var useErr error
	err = p.AllocateOwnerListsFunc(ctx, req, func(resp *abi.Response, flat, bounds []int) error {
		if resp, v, useErr = checkAnswer(s.name, req, resp, queues, consumers, v); useErr == nil {
			useErr = use(resp, v, flat, bounds)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("strategy %s: %w", s.name, err)
	}
	return useErr
}

// checkAnswer refuses an answer to a request that the host had to sort (queues and consumers
// are the caller's slices), and a list-form answer with a failed result.
func checkAnswer(name string, req *abi.Request, resp *abi.Response, queues []abi.Queue, consumers []string, v Version) (*abi.Response, Version, error) {
	if !sameSlice(queues, req.Queues) || !sameSlice(consumers, req.Consumers) {
		req.Queues, req.Consumers = queues, consumers
		return nil, Version{}, fmt.Errorf("strategy %s: request not in canonical order", name)
	}
	for i, res := range resp.Results {
		if res.Failed {
			return nil, Version{}, fmt.Errorf("strategy %s: plugin failed for consumer %q: %s", name, req.Consumers[i], res.Err)
		}
	}
	return resp, v, nil
}

// sameSlice reports whether a and b are the same slice (the same array and length).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// request builds the plugin's request for g in canonical order, with the permutations back to
// the caller's order (nil where the caller's order is canonical already). Building it was two
// thirds of a whole-group call of 1,024 queues (a copy of 40 KiB and an order check a call); a
// group whose queues equal the last one's, in the same order, reuses that list (BENCHMARKS.md,
// "The embedding API's whole-group call"), and one whose consumers do, theirs.
func (s *Strategy) request(g *Group) (req *abi.Request, qperm, cperm []int) {
	if last := s.queues.Load(); last != nil && (sameMemory(g.Queues, last.given) || sameQueues(g.Queues, last.sent)) {
		req = &abi.Request{Group: g.Name, Config: g.Config, Queues: last.sent, QueuesFrozen: true}
		return req, nil, s.consumers(g, req)
	}
	req, qperm = queueRequest(g)
	cperm = s.consumers(g, req)
	if qperm == nil && req.QueueAttrs == nil && req.PrevOwners == nil {
		// req.Queues, not &req.Queues: the host may replace the request's slice.
		last := &lastQueues{sent: req.Queues}
		if noMaps(g.Queues) { // an empty map may be filled in place: compared field by field
			last.given = slices.Clone(g.Queues)
		}
		s.queues.Store(last)
		req.QueuesFrozen = true
	}
	return req, qperm, cperm
}

// consumers is consumers(g, req) for this strategy: a group whose consumers are, byte for byte,
// those of the last one without attributes gets that group's id list and permutation again
// (never modified), sparing the copy of the ids, their order check and their allocation, 8 % of
// the embedding API's whole-group call of 1,024 queues and 64 consumers (BENCHMARKS.md, "work
// done twice on the host side of a whole-group call"). The host's encoder then finds the same
// list and reuses its section too.
func (s *Strategy) consumers(g *Group, req *abi.Request) (cperm []int) {
	if last := s.ids.Load(); last != nil && sameMemory(g.Consumers, last.given) {
		req.Consumers = last.sent
		return last.perm
	}
	cperm = consumers(g, req)
	if noConsumerMaps(g.Consumers) { // then no attributes either
		s.ids.Store(&lastConsumers{sent: req.Consumers, perm: cperm, given: slices.Clone(g.Consumers)})
	}
	return cperm
}

// lastConsumers is the last consumer list a Strategy sent without attributes: the ids sent and
// the permutation back to the caller's order (neither ever modified), and a copy of the
// caller's consumers they were built from.
type lastConsumers struct {
	sent  []string
	perm  []int
	given []Consumer
}

// noConsumerMaps reports whether no consumer has a Labels or Metrics map, even an empty one.
func noConsumerMaps(cs []Consumer) bool {
	for i := range cs {
		if cs[i].Labels != nil || cs[i].Metrics != nil {
			return false
		}
	}
	return true
}

// lastQueues is the last queue list a Strategy sent that had no attributes or previous owners:
// the list sent (never modified) and a copy of the caller's queues it was built from.
type lastQueues struct {
	sent  []abi.Queue
	given []Queue
}

// noMaps reports whether no queue has a Labels or Metrics map, even an empty one.
func noMaps(qs []Queue) bool {
	for i := range qs {
		if qs[i].Labels != nil || qs[i].Metrics != nil {
			return false
		}
	}
	return true
}

// sameMemory reports whether qs are, byte for byte, the copy of the caller's queues (or
// consumers) that the last list was built from: then each name is the same string (a string's
// bytes never change), and Labels and Metrics are nil, as they were. One comparison of memory
// replaces the field by field one for a caller that keeps its queues from call to call; a caller
// whose names are new strings each time fails it at the first queue and is compared field by
// field (consumers are then copied and sorted anew).
func sameMemory[T Queue | Consumer](qs, given []T) bool {
	if len(qs) != len(given) || len(qs) == 0 {
		return false
	}
	size := len(qs) * int(unsafe.Sizeof(qs[0]))
	return bytes.Equal(unsafe.Slice((*byte)(unsafe.Pointer(&qs[0])), size), unsafe.Slice((*byte)(unsafe.Pointer(&given[0])), size))
}

// sameQueues reports whether qs, queue by queue, are last's, with no attributes and no previous
// owners.
func sameQueues(qs []Queue, last []abi.Queue) bool {
	if len(qs) != len(last) {
		return false
	}
	for i := range qs {
		q, l := &qs[i], &last[i]
		if q.QueueID != l.QueueID || q.BrokerName != l.BrokerName || q.Topic != l.Topic ||
			len(q.Labels) > 0 || len(q.Metrics) > 0 || q.PrevOwner != "" {
			return false
		}
	}
	return true
}

// queueRequest builds the plugin's request with g's queues in canonical order (its consumers
// are the caller's to set), and the permutation back to the caller's order (nil where the
// caller's order is canonical already).
func queueRequest(g *Group) (req *abi.Request, qperm []int) {
	req = &abi.Request{Group: g.Name, Config: g.Config}
	n := len(g.Queues)
	sorted := slices.IsSortedFunc(g.Queues, compareQueues)
	if !sorted {
		qperm = order(n, func(a, b int) int { return compareQueues(g.Queues[a], g.Queues[b]) })
	}
	at := func(i int) *Queue {
		if qperm != nil {
			return &g.Queues[qperm[i]]
		}
		return &g.Queues[i]
	}
	req.Queues = make([]abi.Queue, n)
	var attrs, owners bool
	for i := range n {
		q := at(i)
		req.Queues[i] = abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}
		attrs = attrs || len(q.Labels) > 0 || len(q.Metrics) > 0
		owners = owners || q.PrevOwner != ""
	}
	if attrs {
		req.QueueAttrs = make([]abi.Attrs, n)
		for i := range n {
			q := at(i)
			req.QueueAttrs[i] = abi.Attrs{Labels: q.Labels, Metrics: q.Metrics}
		}
	}
	if owners {
		req.PrevOwners = make([]string, n)
		for i := range n {
			req.PrevOwners[i] = at(i).PrevOwner
		}
	}
	return req, qperm
}

// consumers sets req's consumers (and their attributes) from g's, in canonical order, and
// returns the permutation that sorted them (nil: already in order).
func consumers(g *Group, req *abi.Request) (cperm []int) {
	m := len(g.Consumers)
	if !slices.IsSortedFunc(g.Consumers, func(a, b Consumer) int { return strings.Compare(a.ID, b.ID) }) {
		cperm = order(m, func(a, b int) int { return strings.Compare(g.Consumers[a].ID, g.Consumers[b].ID) })
	}
	cat := func(i int) *Consumer {
		if cperm != nil {
			return &g.Consumers[cperm[i]]
		}
		return &g.Consumers[i]
	}
	req.Consumers = make([]string, m)
	var cattrs bool
	for i := range m {
		c := cat(i)
		req.Consumers[i] = c.ID
		cattrs = cattrs || len(c.Labels) > 0 || len(c.Metrics) > 0
	}
	if cattrs {
		req.ConsumerAttrs = make([]abi.Attrs, m)
		for i := range m {
			c := cat(i)
			req.ConsumerAttrs[i] = abi.Attrs{Labels: c.Labels, Metrics: c.Metrics}
		}
	}
	return cperm
}

func compareQueues(a, b Queue) int {
	return abi.CompareQueues(abi.Queue{Topic: a.Topic, BrokerName: a.BrokerName, QueueID: a.QueueID},
		abi.Queue{Topic: b.Topic, BrokerName: b.BrokerName, QueueID: b.QueueID})
}

// order returns the stable sorting permutation of n elements.
func order(n int, c func(a, b int) int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	slices.SortStableFunc(p, func(a, b int) int { return cmp.Or(c(a, b), cmp.Compare(a, b)) })
	return p
}

// cacheFolder is the folder for one daemon's modules: one per daemon URL, so two daemons'
// plugins of one name never overwrite each other.
func cacheFolder(root, daemon string) string {
	sum := sha256.Sum256([]byte(strings.TrimRight(daemon, "/")))
	return filepath.Join(root, "modules", hex.EncodeToString(sum[:8]))
}
