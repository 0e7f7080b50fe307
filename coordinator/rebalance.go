package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// maxParallelCalls bounds the plugin calls one Tick runs at once, so a slow plugin holds up
// other groups no longer than its own deadline while a burst of groups cannot flood the host.
const maxParallelCalls = 8

// job is the recomputation of one (group, topic): a snapshot of its inputs taken under the
// mutex, and the result computed without it.
type job struct {
	g       *group
	st      *topicState
	seq     uint64
	binding Binding
	queues  []abi.Queue
	cids    map[string]string // member key -> client id at snapshot time
	base    string            // fingerprint of the inputs, without the plugin version
	basis   *basis            // the inputs, for the history's trigger
	req     *abi.Request      // nil when no plugin is needed
	// table numbers queues (the answer's are among them) for prevOwners, the handoff split
	// and the moves; nil when no plugin is needed.
	table *store.QueueTable

	result  map[string][]abi.Queue
	version string
	err     error
}

// Run calls Tick whenever work is due, until ctx ends. Plugin calls made by Tick use ctx.
func (c *Coordinator) Run(ctx context.Context) error {
	const minWait, maxWait = 10 * time.Millisecond, time.Second
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-c.wake:
		}
		next := c.Tick(ctx)
		wait := maxWait
		if !next.IsZero() {
			wait = min(max(next.Sub(c.clock.Now()), minWait), maxWait)
		}
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timer.Reset(wait)
	}
}

// Tick does the work that is due at the clock's time: it drops members whose session ran out,
// recomputes the (group, topic)s whose inputs changed and whose debounce window has passed,
// publishes the new generations, and retries failed ones after their backoff. It returns when
// it next has work (zero if none is scheduled). Tick blocks while it calls plugins; calls are
// serialized.
func (c *Coordinator) Tick(ctx context.Context) time.Time {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()

	c.mu.Lock()
	now := c.clock.Now()
	c.expire(now)
	c.revokeTimeouts(now)
	c.scaleTick(now)
	jobs := c.dueJobs(now)
	c.mu.Unlock()

	c.run(ctx, jobs)

	c.mu.Lock()
	defer c.mu.Unlock()
	now = c.clock.Now()
	c.install(jobs, now)
	return earliest(c.nextDeadline(now), c.scaleDeadline())
}

// dueJobs snapshots every dirty (group, topic) whose time has come and whose inputs really
// differ from its generation's; states whose inputs turn out unchanged are simply cleaned.
func (c *Coordinator) dueJobs(now time.Time) []*job {
	var jobs []*job
	for _, g := range c.groups {
		for _, st := range g.topics {
			if !st.dirty || st.computing || now.Before(st.due(&c.opts)) || c.held(g, st, now) {
				continue
			}
			if c.pending(st) {
				st.dirty = false // nothing to compute until the topic is declared
				continue
			}
			j := c.snapshot(g, st, g.cfg.Binding)
			if st.gen != nil && st.failures == 0 && c.fingerprint(j, c.plugins[j.binding.Strategy]) == st.gen.Inputs {
				st.dirty = false
				continue
			}
			st.computing = true
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// held reports whether a generation persisted before a restart must wait for members that have
// not come back yet.
func (c *Coordinator) held(g *group, st *topicState, now time.Time) bool {
	if st.gen == nil || !now.Before(c.graceUntil) {
		return false
	}
	for key := range st.gen.Assignment {
		if g.keys[key] == nil {
			return true
		}
	}
	return false
}

// snapshot captures a (group, topic)'s inputs under binding b. When the answer needs no plugin
// (broadcasting, message delivery, no members, no queues) it is computed here.
func (c *Coordinator) snapshot(g *group, st *topicState, b Binding) *job {
	j := &job{g: g, st: st, seq: st.seq, binding: b}
	var rl *readList
	if t, ok := c.topics[st.name]; ok {
		rl = c.readList(t)
		j.queues = rl.queues
	}
	ms := g.sortedMembers(st.name)
	j.cids = make(map[string]string, len(ms))
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.key
		j.cids[m.key] = m.cid
	}
	j.base = inputsBase(b, j.queues, ms, &st.queuesPrint)
	j.basis = newBasis(b, j.queues, ms)
	switch {
	case !usesPlugin(b):
		j.result = make(map[string][]abi.Queue, len(keys))
		for _, k := range keys {
			j.result[k] = j.queues
		}
	case len(keys) == 0 || len(j.queues) == 0:
		// RocketMQ's strategies refuse an empty mqAll or cidAll; the answer is plain anyway.
		j.result = make(map[string][]abi.Queue, len(keys))
		for _, k := range keys {
			j.result[k] = []abi.Queue{}
		}
	default:
		attrs := make([]abi.Attrs, len(ms))
		for i, m := range ms {
			attrs[i].Labels = m.labels
			if m.hasWeight {
				attrs[i].Metrics = map[string]int64{WeightLabel: m.weight}
			}
		}
		j.table = rl.table()
		j.req = &abi.Request{
			Group: g.cfg.Name, Queues: j.queues, Consumers: keys, ConsumerAttrs: attrs,
			Config: b.Config, PrevOwners: prevOwners(st.gen, j.queues, j.table, rl.aligned),
			// A readList's queues are never written: the host's encoder keeps a reference to
			// them and knows them again by their address.
			QueuesFrozen: true,
		}
	}
	return j
}

// readList is a topic's read queues in canonical order (ReadQueues), kept while its brokers do
// not change, and their queue table, made on first use: a rebalance of a 100,000-queue topic
// neither lists nor numbers them again, and the same list (one backing array) serves every
// generation of the topic, which lets the inputs' hash (inputsBase) and the handoff bookkeeping
// recognise it. Lists and table are read under the coordinator's mutex only (the table's
// lookups remember their last broker) and never written.
type readList struct {
	brokers []Broker
	queues  []abi.Queue
	t       *store.QueueTable
	aligned bool // queues[i] is in t's slot i (canonical and distinct, as ReadQueues lists them)
}

// readList is t's read queues, from the cache when its brokers are those of the last call.
func (c *Coordinator) readList(t Topic) *readList {
	if rl := c.readLists[t.Name]; rl != nil && slices.Equal(rl.brokers, t.Brokers) {
		return rl
	}
	rl := &readList{brokers: slices.Clone(t.Brokers), queues: ReadQueues(t)}
	if c.readLists == nil {
		c.readLists = map[string]*readList{}
	}
	c.readLists[t.Name] = rl
	return rl
}

func (rl *readList) table() *store.QueueTable {
	if rl.t == nil {
		rl.t = store.QueueTableOf(rl.queues)
		rl.aligned = rl.t.Align(rl.queues) // and a generation's stretches of queues are spans of t
	}
	return rl.t
}

// prevOwners lists, parallel to queues, the key that owned each queue in gen; t is the table
// of queues, aligned when queues[i] is in its slot i.
func prevOwners(gen *store.Generation, queues []abi.Queue, t *store.QueueTable, aligned bool) []string {
	if gen == nil {
		return nil
	}
	owner := make([]string, t.Len())
	var slots []int32
	for key, qs := range target(gen) {
		slots = t.AppendSlots(slots[:0], qs)
		for _, i := range slots {
			if i >= 0 {
				owner[i] = key
			}
		}
	}
	if aligned {
		return owner
	}
	out := make([]string, len(queues))
	for i, q := range queues {
		out[i] = owner[t.Index(q)]
	}
	return out
}

// run computes the jobs that need a plugin, a few at a time.
func (c *Coordinator) run(ctx context.Context, jobs []*job) {
	sem := make(chan struct{}, maxParallelCalls)
	var wg sync.WaitGroup
	for _, j := range jobs {
		if j.req == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			j.result, j.version, j.err = c.allocate(ctx, j.binding.Strategy, j.req)
		}()
	}
	wg.Wait()
}

// allocate calls the plugin, counts the call, and turns the answer into key -> queues. A
// failed result for any member fails the whole call: a partial answer would leave that
// member's queues to nobody.
func (c *Coordinator) allocate(ctx context.Context, plugin string, req *abi.Request) (map[string][]abi.Queue, string, error) {
	start := time.Now()
	var resp *abi.Response
	var version string
	var err error
	if oa, ok := c.opts.Allocator.(OwnerAllocator); ok {
		resp, version, err = oa.AllocateOwners(ctx, plugin, req)
	} else {
		resp, version, err = c.opts.Allocator.Allocate(ctx, plugin, req)
	}
	c.m.observeCall(plugin, time.Since(start), err)
	if err != nil {
		return nil, version, err
	}
	if resp.Owners != nil && len(resp.Results) == 0 {
		if err := abi.CheckOwners(req, resp.Owners); err != nil {
			c.m.callErrors.WithLabelValues(plugin).Inc()
			return nil, version, fmt.Errorf("plugin %q: invalid answer: %w", plugin, err)
		}
		return ownersAssignment(req, resp.Owners), version, nil
	}
	if err := abi.Validate(req, resp); err != nil {
		c.m.callErrors.WithLabelValues(plugin).Inc()
		return nil, version, fmt.Errorf("plugin %q: invalid answer: %w", plugin, err)
	}
	out := make(map[string][]abi.Queue, len(req.Consumers))
	var failures []string
	for i, r := range resp.Results {
		key := req.Target(i)
		if r.Failed {
			failures = append(failures, fmt.Sprintf("consumer %q: %s", key, r.Err))
			continue
		}
		qs := make([]abi.Queue, len(r.Indices))
		for n, x := range r.Indices {
			qs[n] = req.Queues[x]
		}
		out[key] = qs
	}
	if len(failures) > 0 {
		c.m.callErrors.WithLabelValues(plugin).Inc()
		return nil, version, fmt.Errorf("plugin %q failed for %d of %d members: %s", plugin, len(failures), len(resp.Results), strings.Join(failures, "; "))
	}
	return out, version, nil
}

// ownersAssignment is key -> queues from an owner-form answer that abi.CheckOwners accepted (every
// owner NoOwner or the first index of its consumer id): each consumer's queues in mqAll order, as
// the list form resolved from the same owners gives them, every consumer present (an empty list
// for one that owns nothing). When the owners never decrease and none is missing (AVG's blocks),
// each list is the run of req.Queues it owns, shared as the broadcast case shares the queues
// (a generation's lists are never written, and their capacity ends with them); otherwise the
// lists are slices of one copy.
func ownersAssignment(req *abi.Request, owners []int32) map[string][]abi.Queue {
	nc := len(req.Consumers)
	end := make([]int, nc+1) // end[o+1] counts owner o's queues, then ends its run
	runs, prev := true, int32(0)
	for _, o := range owners {
		if o < 0 {
			runs = false
			continue
		}
		end[o+1]++
		runs = runs && o >= prev
		prev = o
	}
	for o := range nc {
		end[o+1] += end[o]
	}
	queues := req.Queues
	if !runs {
		queues = make([]abi.Queue, end[nc])
		next := slices.Clone(end[:nc]) // where owner o's next queue goes
		for q, o := range owners {
			if o >= 0 {
				queues[next[o]] = req.Queues[q]
				next[o]++
			}
		}
	}
	out := make(map[string][]abi.Queue, nc)
	for o := range nc {
		if _, seen := out[req.Consumers[o]]; !seen { // a repeated id: its first index owns
			out[req.Consumers[o]] = queues[end[o]:end[o+1]:end[o+1]]
		}
	}
	return out
}

// pending is a generation waiting to be stored before it replaces the one in force.
type pending struct {
	j       *job // nil for a stored-only change (a renamed key)
	st      *topicState
	g       *group
	gen     *store.Generation
	publish bool // a new number: wake long-polls
	// released are the held-back queues a handoff generation hands over (handoff.go).
	released []model.Release
}

// install stores and publishes the results of jobs, in one store transaction.
func (c *Coordinator) install(jobs []*job, now time.Time) {
	var batch []pending
	for _, j := range jobs {
		j.st.computing = false
		if c.groups[j.g.cfg.Name] != j.g || j.g.topics[j.st.name] != j.st {
			continue // the group was deleted meanwhile
		}
		c.m.rebalances.WithLabelValues(j.g.cfg.Name).Inc()
		if j.err != nil {
			c.fail(j.g, j.st, j.err, now)
			continue
		}
		version := ""
		if j.req != nil {
			version = j.version
			// Adopt the version of a plugin nobody announced (the registry tells about
			// reloads; this covers a coordinator started without announcements).
			if _, known := c.plugins[j.binding.Strategy]; !known && version != "" {
				c.plugins[j.binding.Strategy] = version
			}
		}
		gen := &store.Generation{
			Group: j.g.cfg.Name, Topic: j.st.name, Assignment: j.result, CIDs: currentCIDs(j.g, j.cids),
			Inputs: c.fingerprint(j, version), At: now.UTC(),
		}
		if j.req != nil {
			gen.Plugin, gen.PluginVersion = j.binding.Strategy, version
		}
		j.basis.version = gen.PluginVersion
		c.cooperate(j.g, j.st, gen, j.binding, j.table, now)
		old := j.st.gen
		switch {
		case old == nil || !equalAssignment(old.Assignment, gen.Assignment):
			gen.Number = 1
			if old != nil {
				gen.Number = old.Number + 1
			}
			batch = append(batch, pending{j: j, st: j.st, g: j.g, gen: gen, publish: true, released: c.releases(j.g, j.st, gen, now)})
		case old.Inputs != gen.Inputs || old.PluginVersion != gen.PluginVersion || j.st.persist:
			// Same queues from new inputs (a label the strategy ignores, a reload that
			// answers alike): keep the number, remember the inputs.
			gen.Number, gen.At = old.Number, old.At
			batch = append(batch, pending{j: j, st: j.st, g: j.g, gen: gen})
		default:
			c.settled(j, old)
		}
	}
	// Keys renamed by restarted static members, not yet stored.
	for _, g := range c.groups {
		for _, st := range g.topics {
			if st.persist && !st.computing && !slices.ContainsFunc(batch, func(p pending) bool { return p.st == st }) {
				gen := *st.gen
				gen.CIDs = maps.Clone(st.gen.CIDs)
				batch = append(batch, pending{st: st, g: g, gen: &gen})
			}
		}
	}
	batch = append(batch, c.handoffs(batch, now)...)
	if len(batch) == 0 {
		return
	}
	if err := c.storeGenerations(batch, now); err != nil {
		err = fmt.Errorf("storing generations: %w", err)
		for _, p := range batch {
			if p.j != nil {
				c.fail(p.g, p.st, err, now)
			}
		}
		c.log.Error().Err(err).Int("generations", len(batch)).Msg("generations not published: the store refused them")
		return
	}
	for _, p := range batch {
		p.st.gen = p.gen
		p.st.persist = false
		if p.publish {
			c.publishedHoldings(p.g, p.st, p.gen, now)
		}
		if p.j != nil {
			p.st.ho.basis = p.j.basis
		}
		if p.j == nil {
			if p.publish {
				c.m.generations.WithLabelValues(p.g.cfg.Name).Inc()
				c.m.generation.WithLabelValues(p.g.cfg.Name, p.st.name).Set(float64(p.gen.Number))
				c.log.Info().Str("group", p.g.cfg.Name).Str("topic", p.st.name).Int64("generation", p.gen.Number).
					Int("handedOver", len(p.released)).Int("stillHeld", p.gen.Handoffs.Len()).Msg("handoff generation published")
			}
			continue
		}
		c.settled(p.j, p.gen)
		if p.publish {
			c.m.generations.WithLabelValues(p.g.cfg.Name).Inc()
			c.m.generation.WithLabelValues(p.g.cfg.Name, p.st.name).Set(float64(p.gen.Number))
			ev := c.log.Info()
			if len(p.gen.Assignment) == 0 {
				ev = c.log.Debug() // the last member left: worth no line per (group, topic)
			}
			ev.Str("group", p.g.cfg.Name).Str("topic", p.st.name).Int64("generation", p.gen.Number).
				Int("members", len(p.gen.Assignment)).Str("plugin", p.gen.Plugin).Msg("generation published")
		}
	}
	notified := map[*group]bool{}
	for _, p := range batch {
		if p.publish && !notified[p.g] {
			notified[p.g] = true
			p.g.notify()
		}
	}
}

// settled clears a state's failure, and its dirty mark unless its inputs changed while the
// job ran or the plugin was announced in a new version since.
func (c *Coordinator) settled(j *job, gen *store.Generation) {
	st := j.st
	st.failures, st.lastErr, st.retryAt = 0, "", time.Time{}
	if st.seq == j.seq && (j.req == nil || c.fingerprint(j, c.plugins[j.binding.Strategy]) == gen.Inputs) {
		st.dirty = false
	}
}

// fail records a failed recomputation: the generation in force stays, and the state is retried
// with exponential backoff.
func (c *Coordinator) fail(g *group, st *topicState, err error, now time.Time) {
	st.failures++
	st.lastErr = err.Error()
	st.lastErrAt = now
	backoff := time.Second << min(st.failures-1, 10)
	st.retryAt = now.Add(min(backoff, c.opts.MaxRetry))
	c.m.failures.WithLabelValues(g.cfg.Name).Inc()
	ev := c.log.Warn().Err(err).Str("group", g.cfg.Name).Str("topic", st.name).Int("failures", st.failures).
		Time("retryAt", st.retryAt)
	if st.gen != nil {
		ev = ev.Int64("keeping", st.gen.Number)
	}
	ev.Msg("rebalance failed; the previous generation stays in force")
}

// nextDeadline is the earliest time Tick has something to do.
func (c *Coordinator) nextDeadline(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if now.Before(c.graceUntil) {
		consider(c.graceUntil)
	}
	for _, g := range c.groups {
		for _, m := range g.members {
			consider(m.lastSeen.Add(c.opts.SessionTimeout))
		}
		for _, st := range g.topics {
			if d := st.handoffDeadline(); !d.IsZero() {
				consider(d)
			}
			switch {
			case !st.dirty || st.computing:
			case c.held(g, st, now):
				consider(c.graceUntil)
			default:
				consider(st.due(&c.opts))
			}
		}
	}
	return next
}

// queuesPrint is the inputs' hash (inputsBase) after the binding and the queues of a
// (group, topic), kept to hash its next members: the binding's bytes and the queue list
// (compared by identity: a readList's) say whether it still applies.
type queuesPrint struct {
	binding []byte
	queues  []abi.Queue
	h       hash.Hash
}

func (p *queuesPrint) matches(binding []byte, queues []abi.Queue) bool {
	return p != nil && len(p.queues) == len(queues) && len(queues) > 0 && &p.queues[0] == &queues[0] && bytes.Equal(p.binding, binding)
}

// inputsBase fingerprints what an assignment depends on besides the plugin's version: the
// binding (the strategy and config only when a plugin is used), the queues, and the members'
// keys (with labels, when a plugin sees them). Client ids are left out: a static member's
// restart changes nothing. When cache (if not nil) holds the hash of the same binding and queue
// list, the queues are not hashed again; it is replaced by this call's otherwise. The hash is
// the same either way (TestInputsCache): the bytes written are.
func inputsBase(b Binding, queues []abi.Queue, ms []*member, cache **queuesPrint) string {
	var h hash.Hash
	flushed := false // some of buf went to h
	// Each string is written as its length (4 bytes, little-endian) and its bytes, gathered in
	// a buffer that goes to the hash when it fills.
	buf := make([]byte, 0, 32<<10)
	w := func(s string) {
		if len(buf)+4+len(s) > cap(buf) {
			h.Write(buf)
			buf, flushed = buf[:0], true
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(s)))
		if len(s) > cap(buf)-len(buf) {
			h.Write(buf)
			h.Write([]byte(s))
			buf, flushed = buf[:0], true
			return
		}
		buf = append(buf, s...)
	}
	var num [12]byte
	wn := func(n int) { w(string(strconv.AppendInt(num[:0], int64(n), 10))) }
	// The binding's part, gathered whole in buf (unless it is longer than buf) to compare with
	// the cache's.
	h = sha256.New()
	w("allocd-inputs-1")
	w(string(b.Model))
	w(string(b.Delivery))
	plugin := usesPlugin(b)
	if plugin {
		w(b.Strategy)
		writeMap(w, b.Config)
	}
	wn(len(queues))
	whole := !flushed // the binding's bytes are all in buf
	var hit hash.Hash
	if cache != nil && whole && (*cache).matches(buf, queues) {
		hit = cloneHash((*cache).h)
	}
	if hit != nil {
		h, buf = hit, buf[:0]
	} else {
		binding := slices.Clone(buf)
		for _, q := range queues {
			w(q.Topic)
			w(q.BrokerName)
			wn(int(q.QueueID))
		}
		if cache != nil {
			*cache = nil
		}
		if cache != nil && whole && len(queues) > 0 {
			h.Write(buf) // the hash of what is written so far, whatever the buffer's cuts
			buf = buf[:0]
			if saved := cloneHash(h); saved != nil {
				*cache = &queuesPrint{binding: binding, queues: queues, h: saved}
			}
		}
	}
	wn(len(ms))
	for _, m := range ms {
		w(m.key)
		if plugin {
			writeMap(w, m.labels)
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// cloneHash is a copy of h's state, nil if h cannot be copied.
func cloneHash(h hash.Hash) hash.Hash {
	if c, ok := h.(hash.Cloner); ok {
		if dup, err := c.Clone(); err == nil {
			return dup
		}
	}
	return nil
}

// writeMap writes m's size, then its keys in order, each with its value.
func writeMap(w func(string), m map[string]string) {
	switch len(m) {
	case 0: // most members' labels: no keys to sort
		w("0")
		return
	case 1:
		for k, v := range m {
			w("1")
			w(k)
			w(v)
		}
		return
	}
	keys := slices.Sorted(maps.Keys(m))
	w(strconv.Itoa(len(keys)))
	for _, k := range keys {
		w(k)
		w(m[k])
	}
}

// fingerprint completes a job's base with the plugin version that computed (or would compute)
// it; a job without a plugin has no version.
func (c *Coordinator) fingerprint(j *job, version string) string {
	if j.req == nil {
		version = ""
	}
	h := sha256.New()
	h.Write([]byte(j.base))
	h.Write([]byte{0})
	h.Write([]byte(version))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// currentCIDs updates a job's snapshot of key -> client id to the client id holding each key
// now (a static member may have restarted while the plugin ran) and returns it: the job's
// generation takes the map, which the job no longer reads.
func currentCIDs(g *group, snap map[string]string) map[string]string {
	for key, cid := range snap {
		if m := g.keys[key]; m != nil && m.cid != cid {
			snap[key] = m.cid
		}
	}
	return snap
}

func equalAssignment(a, b map[string][]abi.Queue) bool {
	return maps.EqualFunc(a, b, func(x, y []abi.Queue) bool { return slices.Equal(x, y) })
}
