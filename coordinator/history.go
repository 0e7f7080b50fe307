package coordinator

// The history records every published generation of a (group, topic) with its trigger and its
// moves, in the store's generic bucket store.HistoryBucket, in the transaction that stores the
// generation itself when the store can (store.GenerationTx). Retention is bounded by count and
// age (Options.HistoryLimit, Options.HistoryMaxAge), trimmed as each entry is written.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// Defaults of the history's retention.
const (
	DefaultHistoryLimit  = 1000
	DefaultHistoryMaxAge = 7 * 24 * time.Hour
	// MaxHistoryPage caps a History page.
	MaxHistoryPage = 1000
	// DefaultHistoryPage is a History page when the caller names no limit.
	DefaultHistoryPage = 50
)

// The history records, package model's.
type (
	HistoryEntry = model.HistoryEntry
	History      = model.History
	Trigger      = model.Trigger
	Explanation  = model.Explanation
	OwnerChange  = model.OwnerChange
)

// basis is what a generation was computed from, compared with the next one's to say what
// triggered it.
//
// The members are three slices in key order, compared with the next basis's by merging: a
// group of 10,000 members made two maps of them for each rebalance, and looked every key up in
// both (RATIONALE.md).
type basis struct {
	binding  string // fingerprint of the whole binding
	strategy string //
	queues   int    // read queues
	version  string // plugin version; set when the job is installed
	keys     []string
	cids     []string // cids[i] is the client id of the member of key keys[i]
	labels   []string // labels[i] is the fingerprint of its labels; nil: not known
}

// noLabels is the fingerprint of no labels in a basis.
const noLabels = "1:0"

// newBasis is the basis of members ms, in key order (group.sortedMembers); of members sharing
// a key, the last one counts.
func newBasis(b Binding, queues []abi.Queue, ms []*member) *basis {
	bs := &basis{binding: bindingPrint(b), strategy: b.Strategy, queues: len(queues),
		keys: make([]string, 0, len(ms)), cids: make([]string, 0, len(ms)), labels: make([]string, 0, len(ms))}
	var buf []byte
	for _, m := range ms {
		if n := len(bs.keys); n > 0 && bs.keys[n-1] == m.key {
			bs.keys, bs.cids, bs.labels = bs.keys[:n-1], bs.cids[:n-1], bs.labels[:n-1]
		}
		buf = buf[:0]
		writeMap(func(s string) {
			buf = append(strconv.AppendInt(buf, int64(len(s)), 10), ':')
			buf = append(buf, s...)
		}, m.labels) // "len:s" each, as bindingPrint writes
		if string(buf) == noLabels {
			bs.labels = append(bs.labels, noLabels) // most members': one string for all
		} else {
			bs.labels = append(bs.labels, string(buf))
		}
		bs.cids = append(bs.cids, m.cid)
		bs.keys = append(bs.keys, m.key)
	}
	return bs
}

func bindingPrint(b Binding) string {
	var sb strings.Builder
	w := func(s string) { fmt.Fprintf(&sb, "%d:%s", len(s), s) }
	w(b.Strategy)
	w(string(b.Model))
	w(string(b.Delivery))
	w(fmt.Sprint(b.Orderly))
	w(string(handoffMode(b)))
	w(b.RevokeTimeout)
	writeMap(w, b.Config)
	return sb.String()
}

// guessBasis rebuilds what it can of the basis of a generation loaded after a restart.
func guessBasis(gen *store.Generation) *basis {
	bs := &basis{version: gen.PluginVersion, strategy: gen.Plugin, queues: -1}
	bs.keys = slices.Sorted(maps.Keys(target(gen)))
	bs.cids = make([]string, len(bs.keys))
	for i, key := range bs.keys {
		bs.cids[i] = cidOf(gen, key)
	}
	return bs
}

// departure is why a member key left its group, kept until the generations that follow have
// said so.
type departure struct {
	reason string
	at     time.Time
}

// depart removes a member for a reason (model.ReleaseLeft, ReleaseExpired, ReleaseRevokeTimeout).
func (c *Coordinator) depart(g *group, m *member, reason string, now time.Time) {
	if g.departed == nil {
		g.departed = map[string]departure{}
	}
	if len(g.departed) > 256 {
		keep := c.opts.MaxDelay + c.opts.SessionTimeout + c.opts.RestartGrace + time.Minute
		for k, d := range g.departed {
			if now.Sub(d.at) > keep {
				delete(g.departed, k)
			}
		}
	}
	g.departed[m.key] = departure{reason: reason, at: now}
	c.removeMember(g, m, now)
}

// lostSession reports whether a joining member's key lost its previous session to the daemon
// (expired or removed) rather than leaving.
func (g *group) lostSession(hb Heartbeat) bool {
	key := hb.CID
	if hb.InstanceID != "" {
		key = hb.InstanceID
	}
	d, ok := g.departed[key]
	return ok && d.reason != model.ReleaseLeft
}

// departReason is why a member key is gone, model.ReleaseLeft when nobody said.
func (g *group) departReason(key string) string {
	if d, ok := g.departed[key]; ok {
		return d.reason
	}
	return model.ReleaseLeft
}

// trigger says what changed between the basis of the generation in force and a new one.
func (c *Coordinator) trigger(g *group, st *topicState, nb *basis, released []model.Release) model.Trigger {
	var t model.Trigger
	ob := st.ho.basis
	switch {
	case st.gen == nil:
		t.Causes = append(t.Causes, model.CauseFirst)
		ob = &basis{queues: -1}
	case ob == nil:
		ob = guessBasis(st.gen)
	}
	if nb != nil {
		// Both in key order: a key in nb only joined, one in ob only departed.
		i, j := 0, 0
		for i < len(nb.keys) || j < len(ob.keys) {
			switch {
			case j == len(ob.keys) || i < len(nb.keys) && nb.keys[i] < ob.keys[j]:
				t.Joined = append(t.Joined, nb.cids[i])
				i++
			case i == len(nb.keys) || ob.keys[j] < nb.keys[i]:
				switch g.departReason(ob.keys[j]) {
				case model.ReleaseExpired:
					t.Expired = append(t.Expired, ob.cids[j])
				case model.ReleaseRevokeTimeout:
					t.Removed = append(t.Removed, ob.cids[j])
				default:
					t.Left = append(t.Left, ob.cids[j])
				}
				j++
			default:
				if ob.labels != nil && ob.labels[j] != nb.labels[i] {
					t.Labels = append(t.Labels, nb.cids[i])
				}
				i++
				j++
			}
		}
		if ob.binding != "" && ob.binding != nb.binding {
			t.Binding = &model.BindingChange{From: ob.strategy, To: nb.strategy}
		}
		if ob.version != "" && nb.version != "" && ob.version != nb.version && ob.strategy == nb.strategy {
			t.Plugin = &model.VersionChange{Name: nb.strategy, From: ob.version, To: nb.version}
		}
		if ob.queues >= 0 && ob.queues != nb.queues {
			t.Queues = &model.CountChange{From: ob.queues, To: nb.queues}
		}
	}
	t.Released = released
	for _, c := range []struct {
		cause string
		on    bool
	}{
		{model.CauseJoined, len(t.Joined) > 0}, {model.CauseLeft, len(t.Left) > 0},
		{model.CauseExpired, len(t.Expired) > 0}, {model.CauseRevokeTimeout, len(t.Removed) > 0},
		{model.CauseLabels, len(t.Labels) > 0}, {model.CauseBinding, t.Binding != nil},
		{model.CausePlugin, t.Plugin != nil}, {model.CauseQueues, t.Queues != nil},
		{model.CauseHandoff, len(t.Released) > 0},
	} {
		if c.on {
			t.Causes = append(t.Causes, c.cause)
		}
	}
	if len(t.Causes) == 0 {
		t.Causes = []string{model.CauseRestart}
	}
	return t
}

// historyRecord is a history entry to store: its moves and pending handoffs coded in packed
// (none in entry), or, when they could not be packed, spelled out in entry.
type historyRecord struct {
	entry  model.HistoryEntry
	packed *store.MovesPacker
	moved  int    // the number of moves
	out    []byte // the record as last written (marshal), to be reused once it is stored
}

// marshal writes the record, a packed one into dst's room.
func (r *historyRecord) marshal(dst []byte) ([]byte, error) {
	if r.packed != nil {
		return store.AppendPackedHistoryEntry(dst, r.entry, r.packed)
	}
	return store.MarshalHistoryEntry(r.entry)
}

// historyScratch keeps what the last batch's history records were coded and written in, for
// the next batch (under the coordinator's mutex): a rebalance of 100,000 queues codes 50,000
// moves and handoffs into 1.5 MB of buffers and writes a 1.3 MB record, allocated afresh each
// time otherwise (RATIONALE.md, "Why a rebalance's buffers are kept for the next"). It keeps
// two of each.
type historyScratch struct {
	packers []*store.MovesPacker
	bufs    [][]byte
}

const maxHistoryScratch = 2

// packer is an empty packer, a kept one when there is one.
func (h *historyScratch) packer() *store.MovesPacker {
	if n := len(h.packers); n > 0 {
		pk := h.packers[n-1]
		h.packers = h.packers[:n-1]
		return pk
	}
	return store.NewMovesPacker()
}

// buf is an empty buffer, a kept one when there is one.
func (h *historyScratch) buf() []byte {
	if n := len(h.bufs); n > 0 {
		b := h.bufs[n-1]
		h.bufs = h.bufs[:n-1]
		return b[:0]
	}
	return nil
}

// keepPacker takes pk back, emptied; nothing it coded may be read after.
func (h *historyScratch) keepPacker(pk *store.MovesPacker) {
	if pk != nil && len(h.packers) < maxHistoryScratch {
		pk.Reset()
		h.packers = append(h.packers, pk)
	}
}

// keep takes back the packers and buffers of stored records, which are not read after.
func (h *historyScratch) keep(recs []*historyRecord) {
	for _, r := range recs {
		h.keepPacker(r.packed)
		if cap(r.out) > 0 && len(h.bufs) < maxHistoryScratch {
			h.bufs = append(h.bufs, r.out)
		}
		r.packed, r.out = nil, nil
	}
}

// historyEntry describes the publication of p.gen over the generation in force.
func (c *Coordinator) historyEntry(p pending) historyRecord {
	var nb *basis
	if p.j != nil {
		nb = p.j.basis
	}
	e := model.HistoryEntry{
		Group: p.g.cfg.Name, Topic: p.st.name, Generation: p.gen.Number, At: p.gen.At,
		Trigger: c.trigger(p.g, p.st, nb, p.released), Plugin: p.gen.Plugin, PluginVersion: p.gen.PluginVersion,
		Handoff: handoffMode(p.g.cfg.Binding), Members: len(p.gen.Assignment),
	}
	for _, qs := range p.gen.Assignment {
		e.Queues += len(qs)
	}
	if !usesPlugin(p.g.cfg.Binding) {
		e.Handoff = HandoffEager
	}
	var t *store.QueueTable
	if p.j != nil {
		t = p.j.table
	} else if rl := c.readLists[p.st.name]; rl != nil {
		t = rl.t // a handoff generation's queues are the topic's too
	}
	pk := c.hist.packer()
	n, next, ok := packHistoryMoves(pk, p.st.gen, p.gen, t, e.Trigger.Released, p.st.owners)
	p.st.owners = next // describes p.gen: of no use unless p.gen is installed
	if ok {
		return historyRecord{entry: e, packed: pk, moved: n}
	}
	c.hist.keepPacker(pk)
	e.Moves, e.Pending = moves(p.st.gen, p.gen, t), handoffsByCID(p.gen)
	return historyRecord{entry: e, moved: len(e.Moves)}
}

// ownerSlots are the owners of a generation's queues, slot by slot over a queue table, as
// indices into a list of client ids (0 is nobody).
type ownerSlots struct {
	ids  map[string]int32 // client id -> index
	cids []string         // index -> client id; cids[0] is ""
}

func (o *ownerSlots) id(cid string) int32 {
	i, ok := o.ids[cid]
	if !ok {
		i = int32(len(o.cids))
		o.ids[cid] = i
		o.cids = append(o.cids, cid)
	}
	return i
}

// fill sets owners[slot] to the client of each queue of a (gen's); false when a queue is not in t.
func (o *ownerSlots) fill(owners []int32, t *store.QueueTable, gen *store.Generation, a map[string][]abi.Queue) bool {
	var slots []int32
	for key, qs := range a {
		cid := o.id(cidOf(gen, key))
		slots = t.AppendSlots(slots[:0], qs)
		for _, i := range slots {
			if i < 0 {
				return false
			}
			owners[i] = cid
		}
	}
	return true
}

// packHistoryMoves codes into pk (empty), for gen's history record, the moves from old to gen
// (what moves lists), the released queues and gen's pending handoffs by client id (what
// handoffsByCID lists), in the order MarshalHistoryEntry codes them, so that the record is byte
// for byte the one it writes from the spelled-out entry (TestPackedHistoryMoves). It returns
// the number of moves. The owners are compared as client indices over t (or a table built here
// when t lacks a queue): no model.Move or model.Handoff is built. It fails, and the caller
// spells the moves out, when a release's queues are not in queue order (a generation's
// handoffs always are).
func packHistoryMoves(pk *store.MovesPacker, old, gen *store.Generation, t *store.QueueTable, released []model.Release, prev *slotOwners) (int, *slotOwners, bool) {
	o, t, before, after := compareOwners(old, gen, t, prev)
	next := &slotOwners{gen: gen, t: t, o: o, slots: after}
	n := 0
	for i := range before {
		if before[i] != after[i] {
			n++
		}
	}
	pk.Grow(n, gen.Handoffs.Len(), len(o.cids))
	client := make([]int64, len(o.cids)) // owner index -> 1 + its index in pk's client table
	clientOf := func(i int32) uint64 {
		if client[i] == 0 {
			client[i] = int64(pk.Client(o.cids[i])) + 1
		}
		return uint64(client[i] - 1)
	}
	for i := range before {
		if before[i] != after[i] {
			if !pk.Move(t.Queue(i), clientOf(before[i]), clientOf(after[i])) {
				return 0, next, false // a negative queue id
			}
		}
	}
	if !pk.Released(released) {
		return 0, next, false
	}
	// Handoffs name member keys; runs of them share their members.
	var lastFrom, lastTo string
	var from, to uint64
	hs := &gen.Handoffs
	for i, q := range hs.Queues() {
		if hf := hs.From(i); i == 0 || hf != lastFrom {
			lastFrom, from = hf, pk.Client(cidOf(gen, hf))
		}
		if ht := hs.To(i); i == 0 || ht != lastTo {
			lastTo, to = ht, pk.Client(cidOf(gen, ht))
		}
		if !pk.Pending(q, from, to, hs.Since(i), hs.Deadline(i)) {
			return 0, next, false
		}
	}
	return n, next, true
}

// compareOwners finds the owners of old's and gen's queues by client, slot by slot over t (or
// a table built here when t lacks one of their queues), starting from prev's when they are
// old's over t.
func compareOwners(old, gen *store.Generation, t *store.QueueTable, prev *slotOwners) (o *ownerSlots, _ *store.QueueTable, before, after []int32) {
	var oldA map[string][]abi.Queue
	if old != nil {
		oldA = old.Assignment
	}
	if prev != nil && old != nil && prev.gen == old && t != nil && prev.t == t && len(prev.o.cids) <= 2*(len(oldA)+len(gen.Assignment))+16 {
		// old's owners are those its own entry found; its client indices go on.
		o, before, after = prev.o, prev.slots, make([]int32, t.Len())
		if !o.fill(after, t, gen, gen.Assignment) {
			o = nil
		}
	}
	for try := 0; o == nil; try++ {
		if t == nil || try > 0 {
			t = store.NewQueueTable(oldA, gen.Assignment)
		}
		o = &ownerSlots{ids: make(map[string]int32, len(gen.Assignment)+1), cids: []string{""}}
		o.ids[""] = 0
		before, after = make([]int32, t.Len()), make([]int32, t.Len())
		if !o.fill(before, t, old, oldA) || !o.fill(after, t, gen, gen.Assignment) {
			o = nil
		}
	}
	return o, t, before, after
}

// slotOwners are a generation's owners by client, slot by slot over a queue table, as its
// history entry found them: the next entry's moves start from them instead of finding them
// again. Client ids may change in a generation in force (a restarted static member), which
// drops them (renameKey).
type slotOwners struct {
	gen   *store.Generation
	t     *store.QueueTable
	o     *ownerSlots
	slots []int32
}

// moves lists the queues whose owner differs between two generations, by client id, in queue
// order ("" is nobody). The owners are compared slot by slot over one queue table of both
// generations (t, when it has all their queues, else one built here), which lists the queues
// in order: no map keyed by queue, no sort.
func moves(old, gen *store.Generation, t *store.QueueTable) []model.Move {
	o, t, before, after := compareOwners(old, gen, t, nil)
	n := 0
	for i := range before {
		if before[i] != after[i] {
			n++
		}
	}
	out := make([]model.Move, 0, n)
	for i := range before {
		if before[i] != after[i] {
			out = append(out, model.Move{Queue: t.Queue(i), From: o.cids[before[i]], To: o.cids[after[i]]})
		}
	}
	return out
}

// storeGenerations writes a batch of generations with the history entries of those that are
// published, in one transaction when the store can.
func (c *Coordinator) storeGenerations(batch []pending, now time.Time) error {
	gens := make([]store.Generation, len(batch))
	ents := make([]*historyRecord, len(batch)) // the published ones' entries
	for i, p := range batch {
		gens[i] = *p.gen
		// Packed over the topic's own queue table: no table of the record's queues is built.
		// The members' keys in order, as a basis holds them: the job's, or for a handoff's
		// generation the last job's, usually the same members (the store checks the keys
		// against the maps as it writes them).
		if p.j != nil {
			gens[i].KeysInOrder(p.j.basis.keys)
		} else if bs := p.st.ho.basis; bs != nil {
			gens[i].KeysInOrder(bs.keys)
		}
		if p.j != nil && p.j.table != nil {
			gens[i].PackOver(p.j.table)
		} else if rl := c.readLists[p.st.name]; rl != nil && rl.t != nil {
			gens[i].PackOver(rl.t)
		}
		if p.publish {
			e := c.historyEntry(p)
			ents[i] = &e
		}
	}
	entries := published(ents)
	write := func(tx store.Tx) error { return c.writeHistory(tx, entries, now) }
	if gtx, ok := c.store.(store.GenerationTx); ok {
		if err := c.storeGenerationsTx(gtx, gens, ents, now); err != nil {
			return err
		}
	} else {
		if err := c.store.PutGenerations(gens...); err != nil {
			return err
		}
		if len(entries) > 0 {
			if err := c.store.Update(write); err != nil {
				c.log.Error().Err(err).Int("entries", len(entries)).Msg("generations published, but their history entries were not stored")
			}
		}
	}
	for _, e := range entries {
		c.m.moved.WithLabelValues(e.entry.Group).Observe(float64(e.moved))
	}
	c.hist.keep(entries)
	return nil
}

func published(ents []*historyRecord) []*historyRecord {
	var out []*historyRecord
	for _, e := range ents {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// storeGenerationsTx writes gens with their history entries (ents, aligned) in one transaction
// or, when the store cannot take that many records at once (etcd's limits: store.ErrTooLarge),
// in halves, each generation always with its own history entry.
func (c *Coordinator) storeGenerationsTx(gtx store.GenerationTx, gens []store.Generation, ents []*historyRecord, now time.Time) error {
	entries := published(ents)
	err := gtx.PutGenerationsTx(gens, func(tx store.Tx) error { return c.writeHistory(tx, entries, now) })
	if errors.Is(err, store.ErrTooLarge) && len(gens) > 1 {
		half := len(gens) / 2
		if err := c.storeGenerationsTx(gtx, gens[:half], ents[:half], now); err != nil {
			return err
		}
		return c.storeGenerationsTx(gtx, gens[half:], ents[half:], now)
	}
	return err
}

func (c *Coordinator) writeHistory(tx store.Tx, entries []*historyRecord, now time.Time) error {
	r := store.Retention{Count: c.opts.HistoryLimit, MaxAge: c.opts.HistoryMaxAge}
	for _, rec := range entries {
		b, err := rec.marshal(c.hist.buf())
		if err != nil {
			return err
		}
		rec.out = b
		e := &rec.entry
		if err := store.PutHistory(tx, e.Group, e.Topic, e.Generation, b); err != nil {
			return err
		}
		if _, err := store.TrimHistory(tx, e.Group, e.Topic, r, now, store.RecordTime); err != nil {
			return err
		}
	}
	return nil
}

// deleteHistory forgets a deleted group's history; a failure is logged, as the group is gone.
func (c *Coordinator) deleteHistory(group string) {
	if err := c.store.Update(func(tx store.Tx) error { return store.DeleteHistory(tx, group) }); err != nil {
		c.log.Error().Err(err).Str("group", group).Msg("group deleted, but its history was not")
	}
}

// checkHistoryQuery checks the group exists and the topic is named.
func (c *Coordinator) checkHistoryQuery(group, topic string) error {
	if err := CheckName("group", group); err != nil {
		return err
	}
	if err := CheckName("topic", topic); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.groups[group]; !ok {
		return notFound("group %q not found", group)
	}
	return nil
}

// History returns up to limit entries of a (group, topic)'s history older than generation
// before (0: from the newest), newest first. limit 0 means DefaultHistoryPage; it is capped at
// MaxHistoryPage.
func (c *Coordinator) History(group, topic string, limit int, before int64) (History, error) {
	if err := c.checkHistoryQuery(group, topic); err != nil {
		return History{}, err
	}
	if limit < 0 || before < 0 {
		return History{}, invalid("limit %d and before %d must not be negative", limit, before)
	}
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	limit = min(limit, MaxHistoryPage)
	var raw [][]byte // oldest first, at most limit+1: one more tells whether there is a next page
	err := c.store.View(func(tx store.Tx) error {
		return store.ListHistory(tx, group, topic, func(n int64, value []byte) error {
			if before > 0 && n >= before {
				return nil
			}
			if len(raw) == limit+1 {
				raw = slices.Delete(raw, 0, 1)
			}
			raw = append(raw, slices.Clone(value))
			return nil
		})
	})
	if err != nil {
		return History{}, storage(err, "reading the history of %q/%q", group, topic)
	}
	h := History{Group: group, Topic: topic, Entries: []HistoryEntry{}}
	more := len(raw) > limit
	if more {
		raw = raw[1:]
	}
	for i := len(raw) - 1; i >= 0; i-- {
		var e HistoryEntry
		if err := store.UnmarshalHistoryEntry(raw[i], &e); err != nil {
			return History{}, storage(err, "history of %q/%q holds a damaged entry", group, topic)
		}
		h.Entries = append(h.Entries, e)
	}
	if more && len(h.Entries) > 0 {
		h.Next = h.Entries[len(h.Entries)-1].Generation
	}
	return h, nil
}

// Explain tells one queue's story over the retained history of a (group, topic): each
// generation that changed its owner, with the trigger, the plugin version and a sentence.
func (c *Coordinator) Explain(group, topic, brokerName string, queueID int32) (Explanation, error) {
	if err := c.checkHistoryQuery(group, topic); err != nil {
		return Explanation{}, err
	}
	if err := checkBrokerName(brokerName); err != nil {
		return Explanation{}, err
	}
	if queueID < 0 || queueID >= MaxQueues {
		return Explanation{}, invalid("queueId %d is outside [0, %d)", queueID, MaxQueues)
	}
	q := abi.Queue{Topic: topic, BrokerName: brokerName, QueueID: queueID}
	ex := Explanation{Group: group, Topic: topic, Queue: q, Changes: []OwnerChange{}}
	var decodeErr error
	err := c.store.View(func(tx store.Tx) error {
		return store.ListHistory(tx, group, topic, func(n int64, value []byte) error {
			var e HistoryEntry
			if err := store.UnmarshalHistoryEntry(value, &e); err != nil {
				decodeErr = fmt.Errorf("entry of generation %d: %w", n, err)
				return nil // skip it; say so below
			}
			if ex.Oldest == 0 {
				ex.Oldest = e.Generation
			}
			ex.Generation = e.Generation
			if i, ok := slices.BinarySearchFunc(e.Moves, q, func(m model.Move, q abi.Queue) int { return abi.CompareQueues(m.Queue, q) }); ok {
				ch := OwnerChange{Generation: e.Generation, At: e.At, From: e.Moves[i].From, To: e.Moves[i].To,
					Trigger: e.Trigger, Plugin: e.Plugin, PluginVersion: e.PluginVersion}
				for _, h := range e.Pending {
					if h.Queue == q {
						ch.PendingTo = h.To
					}
				}
				ch.Summary = summary(ch)
				ex.Changes = append(ex.Changes, ch)
				ex.Owner = ch.To
			}
			return nil
		})
	})
	if err != nil {
		return Explanation{}, storage(err, "reading the history of %q/%q", group, topic)
	}
	if decodeErr != nil {
		c.log.Warn().Err(decodeErr).Str("group", group).Str("topic", topic).Msg("explain skipped a damaged history entry")
	}
	if ex.Oldest == 0 {
		return ex, notFound("no history of topic %q in group %q", topic, group)
	}
	return ex, nil
}

// summary says an owner change in one sentence.
func summary(ch OwnerChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d at %s: ", ch.Generation, ch.At.UTC().Format(time.RFC3339))
	switch {
	case ch.From == "" && ch.To == "":
	case ch.From == "":
		fmt.Fprintf(&b, "given to %s", ch.To)
	case ch.To == "" && ch.PendingTo != "":
		fmt.Fprintf(&b, "withdrawn from %s, held back for %s until %s lets it go", ch.From, ch.PendingTo, ch.From)
	case ch.To == "":
		fmt.Fprintf(&b, "withdrawn from %s, no owner", ch.From)
	default:
		fmt.Fprintf(&b, "moved from %s to %s", ch.From, ch.To)
	}
	b.WriteString(", because ")
	b.WriteString(DescribeTrigger(ch.Trigger))
	if ch.Plugin != "" {
		fmt.Fprintf(&b, "; computed by %s %s", ch.Plugin, shortVersion(ch.PluginVersion))
	}
	return b.String()
}

func shortVersion(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// DescribeTrigger says what a trigger holds, for people: "c-7 joined; c-3 confirmed the revocation".
func DescribeTrigger(t Trigger) string {
	var parts []string
	list := func(ids []string, verb string) {
		if len(ids) > 0 {
			parts = append(parts, strings.Join(ids, ", ")+" "+verb)
		}
	}
	for _, cause := range t.Causes {
		switch cause {
		case model.CauseFirst:
			parts = append(parts, "first generation")
		case model.CauseJoined:
			list(t.Joined, "joined")
		case model.CauseLeft:
			list(t.Left, "left")
		case model.CauseExpired:
			list(t.Expired, "expired (no heartbeat within the session timeout)")
		case model.CauseRevokeTimeout:
			list(t.Removed, "removed (no confirmation within the revoke timeout)")
		case model.CauseLabels:
			list(t.Labels, "changed labels")
		case model.CauseBinding:
			parts = append(parts, fmt.Sprintf("binding changed (strategy %s -> %s)", t.Binding.From, t.Binding.To))
		case model.CausePlugin:
			parts = append(parts, fmt.Sprintf("plugin %s changed version %s -> %s", t.Plugin.Name, shortVersion(t.Plugin.From), shortVersion(t.Plugin.To)))
		case model.CauseQueues:
			parts = append(parts, fmt.Sprintf("read queues %d -> %d", t.Queues.From, t.Queues.To))
		case model.CauseHandoff:
			for _, r := range t.Released {
				switch r.Reason {
				case model.ReleaseConfirmed:
					parts = append(parts, fmt.Sprintf("handoff: %s confirmed it let %d queue(s) go", r.Member, len(r.Queues)))
				default:
					parts = append(parts, fmt.Sprintf("handoff: %s's %d queue(s) released (%s)", r.Member, len(r.Queues), r.Reason))
				}
			}
		case model.CauseRestart:
			parts = append(parts, "recomputed after a daemon restart")
		default:
			parts = append(parts, cause)
		}
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, "; ")
}
