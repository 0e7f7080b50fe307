package coordinator

// Cooperative handoff keeps one invariant: at no time do two live members both hold a queue in
// the assignments they have been told and have not revoked. A member "may hold" the queues of
// every generation it was told (every generation published while it was live counts as told)
// since the last one it confirmed applying in a heartbeat. A generation gives a queue to its new
// owner only when no other live member may hold it; the strategy's answer (Generation.Target)
// and what members are told (Generation.Assignment) differ by the queues held back
// (Generation.Handoffs). They are handed over, in a generation of their own, as soon as the
// previous owner confirms, leaves or expires. A previous owner that does neither within the
// revoke timeout is removed from the group and its client id fenced for a session timeout, as
// Kafka removes a member that misses its rebalance timeout: it is no longer live, so the
// invariant holds, and its refused heartbeats tell it that it lost its queues.

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// The handoff modes, package model's.
type HandoffMode = model.HandoffMode

// The handoff modes.
const (
	HandoffCooperative = model.HandoffCooperative
	HandoffEager       = model.HandoffEager
	// DefaultHandoff is the mode of a binding that names none.
	DefaultHandoff = HandoffCooperative
	// MaxRevokeTimeout bounds a binding's revokeTimeout.
	MaxRevokeTimeout = time.Hour
)

// maxRecent is how many published assignments a (group, topic) remembers to work out what a
// confirming member may still hold; a member further behind keeps all it may hold until it
// confirms a newer one.
const maxRecent = 16

// handoffState is a (group, topic)'s handoff bookkeeping, in memory only: after a restart it
// starts from the persisted generation and its handoffs.
type handoffState struct {
	// holds maps a member key to the queues it may hold.
	holds map[string]*holding
	// recent are the last published assignments, oldest first, numbers consecutive.
	recent []recentGen
	// reasons are why previous owners let go of held-back queues since the last generation.
	reasons map[string]string
	// basis are the inputs of the last computed generation, for the next trigger (history.go).
	basis *basis
	// confirmed remembers, per member key, the report its holds were last narrowed for: a
	// heartbeat that reports the same generation before anything new is published changes
	// nothing, and costs no set.
	confirmed map[string]confirmMark
}

// confirmMark is a member's applied generation and the newest published one when its holds
// were last narrowed.
type confirmMark struct{ applied, latest int64 }

type recentGen struct {
	number int64
	assign map[string][]abi.Queue
}

func handoffMode(b Binding) HandoffMode {
	if b.Handoff == "" {
		return DefaultHandoff
	}
	return b.Handoff
}

// checkHandoff validates a binding's handoff mode and revoke timeout, filling in the mode.
func checkHandoff(b *Binding) error {
	switch b.Handoff {
	case "":
		b.Handoff = DefaultHandoff
	case HandoffCooperative, HandoffEager:
	default:
		return invalid("handoff %q: want %q or %q", b.Handoff, HandoffCooperative, HandoffEager)
	}
	if b.RevokeTimeout != "" {
		d, err := time.ParseDuration(b.RevokeTimeout)
		if err != nil || d <= 0 || d > MaxRevokeTimeout {
			return invalid("revokeTimeout %q is not a duration in (0, %s] such as \"30s\"", b.RevokeTimeout, MaxRevokeTimeout)
		}
	}
	return nil
}

// revokeTimeout is a binding's revoke timeout: the session timeout unless it says otherwise.
func (c *Coordinator) revokeTimeout(b Binding) time.Duration {
	if d, err := time.ParseDuration(b.RevokeTimeout); err == nil && d > 0 {
		return d
	}
	return c.opts.SessionTimeout
}

// load starts the bookkeeping from a persisted generation: a member may hold what it was told,
// and the previous owners of held-back queues may still hold those.
func (ho *handoffState) load(gen *store.Generation) {
	ho.holds = map[string]*holding{}
	for key, qs := range gen.Assignment {
		ho.add(key, qs)
	}
	for i, q := range gen.Handoffs.Queues() {
		ho.holding(gen.Handoffs.From(i)).addOne(q)
	}
	ho.recent = []recentGen{{gen.Number, gen.Assignment}}
	ho.confirmed = nil
}

// add notes that key may hold qs, a generation's list (shared, never written).
func (ho *handoffState) add(key string, qs []abi.Queue) { ho.holding(key).add(qs) }

// holding is key's, made empty if it has none.
func (ho *handoffState) holding(key string) *holding {
	if ho.holds == nil {
		ho.holds = map[string]*holding{}
	}
	h := ho.holds[key]
	if h == nil {
		h = &holding{}
		ho.holds[key] = h
	}
	return h
}

// maxHoldingLists bounds the lists a holding keeps before it merges them into a copy of their
// distinct queues: a member that never confirms is told a list per generation, and each list
// keeps its generation's array of queues in memory (the last maxRecent are kept anyway).
const maxHoldingLists = 4

// holding is the queues a member may hold: the union of some lists, most of them the
// generations' own (a member told 10 queues in each of two generations holds two references,
// no set), a queue possibly in several. Walking the lists in their order lets the handoff split
// look queues up along their brokers; a set is built only to answer membership of a large
// holding.
type holding struct {
	lists [][]abi.Queue
	own   bool                   // lists[len-1] is the holding's own (addOne appends to it)
	set   map[abi.Queue]struct{} // all the lists' queues, when built; nil after a change
}

// add adds a list, shared with its generation.
func (h *holding) add(qs []abi.Queue) {
	if len(qs) == 0 {
		return
	}
	for _, l := range h.lists {
		if len(l) == len(qs) && &l[0] == &qs[0] {
			return // the same list again (an unchanged member's, shared by two generations)
		}
	}
	h.lists, h.own, h.set = append(h.lists, qs), false, nil
	if len(h.lists) > maxHoldingLists {
		h.merge()
	}
}

// addOne adds a queue to the holding's own list.
func (h *holding) addOne(q abi.Queue) {
	if !h.own && len(h.lists) >= maxHoldingLists {
		h.merge() // and append to the merged copy
	}
	if !h.own {
		h.lists, h.own = append(h.lists, nil), true
	}
	h.lists[len(h.lists)-1] = append(h.lists[len(h.lists)-1], q)
	h.set = nil
}

// merge replaces the lists by one of their distinct queues, in queue order.
func (h *holding) merge() {
	var all []abi.Queue
	for _, l := range h.lists {
		all = append(all, l...)
	}
	slices.SortFunc(all, abi.CompareQueues)
	h.lists, h.own, h.set = [][]abi.Queue{slices.CompactFunc(all, func(a, b abi.Queue) bool { return a == b })}, true, nil
}

// queues counts the queues of the lists, a queue in two of them twice.
func (h *holding) queues() int {
	if h == nil {
		return 0
	}
	n := 0
	for _, l := range h.lists {
		n += len(l)
	}
	return n
}

// has reports whether q is one of the holding's queues.
func (h *holding) has(q abi.Queue) bool {
	if h == nil {
		return false
	}
	if h.set == nil && h.queues() > 32 {
		h.set = h.distinctSet()
	}
	if h.set != nil {
		_, ok := h.set[q]
		return ok
	}
	for _, l := range h.lists {
		if slices.Contains(l, q) {
			return true
		}
	}
	return false
}

func (h *holding) distinctSet() map[abi.Queue]struct{} {
	set := make(map[abi.Queue]struct{}, h.queues())
	for _, l := range h.lists {
		for _, q := range l {
			set[q] = struct{}{}
		}
	}
	return set
}

// within reports whether every queue of h is one of o's: a list both share is not looked into.
func (h *holding) within(o *holding) bool {
	for _, l := range h.lists {
		if slices.ContainsFunc(o.lists, func(ol []abi.Queue) bool { return len(ol) == len(l) && &ol[0] == &l[0] }) {
			continue
		}
		for _, q := range l {
			if !o.has(q) {
				return false
			}
		}
	}
	return true
}

// live reports whether a member key counts as live: it has a session, or it may still come back
// during the restart grace.
func (c *Coordinator) live(g *group, key string, now time.Time) bool {
	return g.keys[key] != nil || now.Before(c.graceUntil)
}

// waitsFor reports whether a handoff waits for a member key to let its queues go: a live member
// that confirms revocations, or one that may still come back during the restart grace. A
// member that never confirms (an HTTP client that reports no generations) could not release
// a queue before its revoke timeout; it is handed off eagerly instead, as Kafka falls back to
// the eager protocol for a member that does not support the cooperative one.
func (c *Coordinator) waitsFor(g *group, key string, now time.Time) bool {
	if m := g.keys[key]; m != nil {
		return m.confirms
	}
	return now.Before(c.graceUntil)
}

// waitingHolders are the keys, in order, of those that may hold some of st's queues and that
// a handoff waits for (waitsFor). Past the restart grace they are live members, which the group
// keeps in key order: 10,000 keys are picked out in order rather than sorted each rebalance.
func (c *Coordinator) waitingHolders(g *group, st *topicState, now time.Time) []string {
	keys := make([]string, 0, len(st.ho.holds))
	if now.Before(c.graceUntil) {
		for key, h := range st.ho.holds {
			if len(h.lists) > 0 && c.waitsFor(g, key, now) {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		return keys
	}
	for _, m := range g.byKey {
		// g.keys names one member per key: the live one, which byKey may list among others.
		if h := st.ho.holds[m.key]; h != nil && len(h.lists) > 0 && g.keys[m.key] == m && m.confirms {
			keys = append(keys, m.key)
		}
	}
	return keys
}

// cooperate turns a freshly computed generation into what members may be told under b: in
// cooperative mode, the strategy's answer minus the queues another live member may still hold.
// t, when not nil, is a table of the answer's queues.
func (c *Coordinator) cooperate(g *group, st *topicState, gen *store.Generation, b Binding, t *store.QueueTable, now time.Time) {
	gen.Target, gen.Handoffs = nil, store.Handoffs{}
	if handoffMode(b) != HandoffCooperative || !usesPlugin(b) {
		return
	}
	c.holdBack(g, st, gen, gen.Assignment, b, t, now)
}

// holdBack sets gen's Assignment to target less the queues held by another live member, and its
// Handoffs to those queues. A handoff already under way keeps its start and deadline. The
// holders and the handoffs are slices over one queue table of target (a queue's slot), so that
// 100,000 held queues cost no map keyed by queue, and the handoffs come out in queue order. t is
// a table of target's queues, or nil to build one.
func (c *Coordinator) holdBack(g *group, st *topicState, gen *store.Generation, target map[string][]abi.Queue, b Binding, t *store.QueueTable, now time.Time) {
	if t == nil {
		t = store.NewQueueTable(target)
	}
	// The two smallest keys that may hold each queue, as 1 + their rank among the waiting
	// holders' keys in order (0: none): the smallest other than a queue's new owner is one of
	// them. Keys are taken in order, so a key seen later never comes before one seen earlier.
	keys := c.waitingHolders(g, st, now)
	rank := make(map[string]int32, len(keys))
	first, second := cleared(&c.hold.first, t.Len()), cleared(&c.hold.second, t.Len())
	var slots []int32
	for r, key := range keys {
		k := int32(r + 1)
		rank[key] = k
		for _, l := range st.ho.holds[key].lists {
			slots = t.AppendSlots(slots[:0], l)
			for _, i := range slots {
				switch {
				case i < 0 || first[i] == k || second[i] != 0:
				case first[i] == 0:
					first[i] = k
				default:
					second[i] = k
				}
			}
		}
	}
	var started []int32 // slot -> 1 + the index of the handoff under way in st.gen.Handoffs
	if st.gen != nil && st.gen.Handoffs.Len() > 0 {
		started = cleared(&c.hold.started, t.Len())
		for n := range st.gen.Handoffs.Len() {
			if i := st.gen.Handoffs.SlotIn(t, n); i >= 0 {
				started[i] = int32(n + 1)
			}
		}
	}
	// The new owners, numbered from 1; heldFor[slot] is the one a held-back queue is for.
	owners := make([]string, 1, len(target)+1)
	ownerRank := make([]int32, 1, len(target)+1)
	heldFor := cleared(&c.hold.heldFor, t.Len())
	held := 0
	eff := make(map[string][]abi.Queue, len(target))
	for key, qs := range target {
		own := rank[key] // 0 when key waits for nothing: then no held queue is its own
		to := int32(len(owners))
		owners, ownerRank = append(owners, key), append(ownerRank, own)
		n := 0
		slots = t.AppendSlots(slots[:0], qs)
		for _, i := range slots {
			if i >= 0 {
				if from := first[i]; from != 0 && (from != own || second[i] != 0) {
					heldFor[i] = to
					n++
				}
			}
		}
		held += n
		if n == 0 {
			eff[key] = qs // nothing held back: the target's own list, shared (lists are never written)
			continue
		}
		out := make([]abi.Queue, 0, len(qs)-n)
		for k, i := range slots {
			if i < 0 || heldFor[i] != to {
				out = append(out, qs[k])
			}
		}
		eff[key] = out
	}
	gen.Assignment, gen.Target, gen.Handoffs = eff, nil, store.Handoffs{}
	if held == 0 {
		return
	}
	since, deadline := now.UTC(), now.Add(c.revokeTimeout(b)).UTC()
	// The handoffs are slots of t, naming members by their index in keys and then owners, a
	// new owner that also waits by its index in keys (RATIONALE.md, "Why a generation's
	// handoffs are slots").
	names := append(slices.Clip(keys), owners[1:]...)
	hs := store.NewHandoffs(t, names, held)
	for i, to := range heldFor {
		if to == 0 {
			continue
		}
		from := first[i]
		if from == ownerRank[to] {
			from = second[i]
		}
		s, d := since, deadline
		if started != nil && started[i] > 0 {
			if old, n := &st.gen.Handoffs, int(started[i]-1); old.From(n) == keys[from-1] {
				s, d = old.Since(n), old.Deadline(n)
			}
		}
		toName := len(keys) + int(to) - 1
		if r := ownerRank[to]; r != 0 {
			toName = int(r) - 1
		}
		hs.Add(i, int(from-1), toName, s, d)
	}
	gen.Target, gen.Handoffs = target, hs
}

// holdScratch is holdBack's working memory, kept from one call to the next: arrays indexed by
// a topic's queue slots, which for 100,000 queues were 1.6 MB allocated a rebalance. It keeps
// the largest topic's, 16 bytes a queue. holdBack reads none of it once it returns.
type holdScratch struct{ first, second, heldFor, started []int32 }

// cleared is *p cleared to n slots, grown first when it is shorter.
func cleared(p *[]int32, n int) []int32 {
	if cap(*p) < n {
		*p = make([]int32, n)
	}
	*p = (*p)[:n]
	clear(*p)
	return *p
}

// target is the strategy's answer in gen: Target when queues are held back, else Assignment.
func target(gen *store.Generation) map[string][]abi.Queue {
	if gen.Target != nil {
		return gen.Target
	}
	return gen.Assignment
}

// handoffs returns the generations that hand held-back queues over, for the (group, topic)s not
// already in batch whose previous owners have let go of some.
func (c *Coordinator) handoffs(batch []pending, now time.Time) []pending {
	var out []pending
	for _, g := range c.groups {
		for _, st := range g.topics {
			if st.gen == nil || st.gen.Handoffs.Len() == 0 || st.computing ||
				slices.ContainsFunc(batch, func(p pending) bool { return p.st == st }) {
				continue
			}
			gen := *st.gen
			gen.CIDs = maps.Clone(st.gen.CIDs)
			c.holdBack(g, st, &gen, st.gen.Target, g.cfg.Binding, c.tableOf(st, st.gen.Target), now)
			if equalAssignment(gen.Assignment, st.gen.Assignment) {
				continue
			}
			gen.Number, gen.At = st.gen.Number+1, now.UTC()
			out = append(out, pending{st: st, g: g, gen: &gen, publish: true, released: c.releases(g, st, &gen, now)})
		}
	}
	return out
}

// tableOf is the table of st's topic's read queues when it has every queue of target (a
// handoff generation's, computed from them), else nil: then holdBack builds one of target's.
func (c *Coordinator) tableOf(st *topicState, target map[string][]abi.Queue) *store.QueueTable {
	rl := c.readLists[st.name]
	if rl == nil {
		return nil
	}
	t := rl.table()
	var slots []int32
	for _, qs := range target {
		slots = t.AppendSlots(slots[:0], qs)
		if slices.Contains(slots, -1) {
			return nil
		}
	}
	return t
}

// releases lists, by previous owner, the held-back queues of st's generation that gen gives to
// the member they were held back for, and why they were let go.
func (c *Coordinator) releases(g *group, st *topicState, gen *store.Generation, now time.Time) []model.Release {
	if st.gen == nil {
		return nil
	}
	// The released handoffs are counted by previous owner first, and each owner's queues laid
	// out in one array: appending 50,000 queues to 5,000 lists grew each through its doublings,
	// 10 MB a handoff generation of 100,000 queues.
	hs := &st.gen.Handoffs
	released := make([]bool, hs.Len())
	count := map[string]int{}
	total := 0
	for i, q := range hs.Queues() {
		if slices.Contains(gen.Assignment[hs.To(i)], q) {
			released[i] = true
			count[hs.From(i)]++
			total++
		}
	}
	froms := make([]string, 0, len(count))
	for from := range count {
		froms = append(froms, from)
	}
	slices.Sort(froms)
	all := make([]abi.Queue, 0, total)
	by := make(map[string][]abi.Queue, len(count))
	for _, from := range froms {
		n := count[from]
		by[from] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for i, q := range hs.Queues() {
		if released[i] {
			from := hs.From(i)
			by[from] = append(by[from], q)
		}
	}
	out := make([]model.Release, 0, len(by))
	for _, from := range froms {
		reason := st.ho.reasons[from]
		if reason == "" {
			reason = model.ReleaseConfirmed
			if !c.live(g, from, now) {
				reason = model.ReleaseLeft
			}
		}
		out = append(out, model.Release{Member: cidOf(st.gen, from), Reason: reason, Queues: by[from]})
	}
	return out
}

// cidOf is the client id holding a member key in gen, or the key itself.
func cidOf(gen *store.Generation, key string) string {
	if cid := gen.CIDs[key]; cid != "" {
		return cid
	}
	return key
}

// publishedHoldings records that every live member was told gen.
func (c *Coordinator) publishedHoldings(g *group, st *topicState, gen *store.Generation, now time.Time) {
	ho := &st.ho
	for key, qs := range gen.Assignment {
		if c.live(g, key, now) {
			ho.add(key, qs)
		}
	}
	if n := len(ho.recent); n > 0 && ho.recent[n-1].number != gen.Number-1 {
		ho.recent = nil // numbers jumped (a reset): what came before says nothing
	}
	ho.recent = append(ho.recent, recentGen{gen.Number, gen.Assignment})
	if len(ho.recent) > maxRecent {
		ho.recent = slices.Delete(ho.recent, 0, len(ho.recent)-maxRecent)
	}
	ho.reasons = nil
}

// confirmApplied takes a member's heartbeat report of the generations it applied: it may now
// hold only what the generations since those told it. A previous owner that let go of held-back
// queues wakes Tick to hand them over.
func (c *Coordinator) confirmApplied(g *group, m *member) {
	for topic, n := range m.applied {
		st := g.topics[topic]
		if st == nil || st.gen == nil || n > st.gen.Number || len(st.ho.recent) == 0 || st.ho.recent[0].number > n {
			continue
		}
		held := st.ho.holds[m.key]
		if held.queues() == 0 {
			continue
		}
		mark := confirmMark{n, st.ho.recent[len(st.ho.recent)-1].number}
		if st.ho.confirmed[m.key] == mark {
			continue
		}
		if st.ho.confirmed == nil {
			st.ho.confirmed = map[string]confirmMark{}
		}
		st.ho.confirmed[m.key] = mark
		now := &holding{}
		for _, r := range st.ho.recent {
			if r.number >= n {
				now.add(r.assign[m.key])
			}
		}
		if held.within(now) && now.within(held) {
			continue // the same queues
		}
		st.ho.holds[m.key] = now
		if c.letGo(st.gen, m.key, held, now) {
			c.poke()
		}
	}
}

// letGo reports whether a member key let go of a queue held back from its new owner in gen:
// one of held not in now that gen's handoffs (sorted by queue) name it the previous owner of.
func (c *Coordinator) letGo(gen *store.Generation, key string, held, now *holding) bool {
	if gen.Handoffs.Len() == 0 {
		return false
	}
	for _, l := range held.lists {
		for _, q := range l {
			if now.has(q) {
				continue
			}
			if i, found := gen.Handoffs.Search(q); found && gen.Handoffs.From(i) == key {
				return true
			}
		}
	}
	return false
}

// dropHolds forgets what a departing member may hold, noting why for the handoff's history.
func (c *Coordinator) dropHolds(g *group, key, reason string) {
	for _, st := range g.topics {
		if _, ok := st.ho.holds[key]; !ok {
			continue
		}
		delete(st.ho.holds, key)
		delete(st.ho.confirmed, key)
		if st.gen != nil && handsOff(&st.gen.Handoffs, key) {
			if st.ho.reasons == nil {
				st.ho.reasons = map[string]string{}
			}
			st.ho.reasons[key] = reason
			c.poke()
		}
	}
}

// handsOff reports whether one of hs is from member key.
func handsOff(hs *store.Handoffs, key string) bool {
	for i := range hs.Len() {
		if hs.From(i) == key {
			return true
		}
	}
	return false
}

// revokeTimeouts removes the members that have held a queue past its handoff's deadline, and
// fences their client ids for a session timeout.
func (c *Coordinator) revokeTimeouts(now time.Time) {
	for _, g := range c.groups {
		late := map[*member][]abi.Queue{}
		for _, st := range g.topics {
			if !st.anyLate(now) {
				continue
			}
			hs := &st.gen.Handoffs
			for i, q := range hs.Queues() {
				if now.Before(hs.Deadline(i)) {
					continue
				}
				from := hs.From(i)
				if m := g.keys[from]; m != nil && st.ho.holds[from].has(q) {
					late[m] = append(late[m], q)
				}
			}
		}
		for m, qs := range late {
			c.depart(g, m, model.ReleaseRevokeTimeout, now)
			g.fenced[m.cid] = fence{at: now, reason: "it did not confirm the revocation of " + queueList(qs) + " within the revoke timeout"}
			c.m.revokeTimeouts.WithLabelValues(g.cfg.Name).Inc()
			c.log.Warn().Str("group", g.cfg.Name).Str("cid", m.cid).Int("queues", len(qs)).
				Msg("member removed: it did not confirm a revocation within the revoke timeout; its queues go to their new owners")
		}
	}
}

func queueList(qs []abi.Queue) string {
	var b strings.Builder
	for i, q := range qs {
		if i == 3 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q.Topic + "/" + q.BrokerName + "/" + strconv.Itoa(int(q.QueueID)))
	}
	return b.String()
}

// handoffDeadline is the earliest deadline of st's handoffs, zero if none. A generation's
// handoffs do not change once it is installed, so it is found once per generation.
func (st *topicState) handoffDeadline() time.Time {
	if st.gen == nil {
		return time.Time{}
	}
	st.handoffDeadlines()
	return st.deadline
}

// handoffDeadlines finds, once per generation, the earliest deadline of st.gen's handoffs as
// handoffDeadline tells it, and the earliest of all.
func (st *topicState) handoffDeadlines() {
	if st.deadlineOf == st.gen {
		return
	}
	var d, first time.Time
	for i := range st.gen.Handoffs.Len() {
		hd := st.gen.Handoffs.Deadline(i)
		if d.IsZero() || hd.Before(d) {
			d = hd
		}
		if i == 0 || hd.Before(first) {
			first = hd
		}
	}
	st.deadlineOf, st.deadline, st.first = st.gen, d, first
}

// anyLate reports whether one of st.gen's handoffs may be past its deadline at now.
func (st *topicState) anyLate(now time.Time) bool {
	if st.gen == nil || st.gen.Handoffs.Len() == 0 {
		return false
	}
	st.handoffDeadlines()
	return !now.Before(st.first)
}

// handoffsByCID rekeys handoffs from member keys to client ids, for the status.
func handoffsByCID(gen *store.Generation) []model.Handoff {
	out := gen.Handoffs.List()
	for i := range out {
		h := &out[i]
		h.From, h.To = cidOf(gen, h.From), cidOf(gen, h.To)
	}
	return out
}
