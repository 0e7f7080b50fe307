package store

import (
	"cmp"
	"iter"
	"slices"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// Handoffs are a generation's handoffs in queue order, kept in 16 bytes each: the queue's slot
// in a queue table, its previous and new owner as indices into a list of member keys, and its
// start and deadline as an index into a list of the handful of times a generation's handoffs
// share. A rebalance that moves half of 100,000 queues holds 50,000 of them back; as
// model.Handoff values (120 bytes, six pointers each) they were the rebalance's largest
// allocation and a 6 MB array for every garbage collection to scan (RATIONALE.md, "Why a
// generation's handoffs are slots"). The zero value is empty. Handoffs are never written once
// built, so a copied Generation shares them; reading them is safe from several goroutines.
type Handoffs struct {
	table *QueueTable
	items []handoffItem
	keys  []string
	times []handoffWhen
}

type handoffItem struct{ slot, from, to, when int32 }

type handoffWhen struct{ since, deadline time.Time }

// NewHandoffs starts an empty list of handoffs over the slots of t, naming members by their
// indices in keys (which it keeps and must not be written); a member should be named by one
// index, since a record groups handoffs by their indices (a member under two would make two
// groups of what could be one). Handoffs are then added with Add in slot order.
func NewHandoffs(t *QueueTable, keys []string, n int) Handoffs {
	return Handoffs{table: t, keys: keys, items: make([]handoffItem, 0, n)}
}

// Add appends the handoff of the queue in slot from keys[from] to keys[to]; slots must come in
// increasing order.
func (h *Handoffs) Add(slot, from, to int, since, deadline time.Time) {
	w := len(h.times) - 1
	for ; w >= 0; w-- {
		if ts := &h.times[w]; ts.since == since && ts.deadline == deadline { // == as a record's runs compare them
			break
		}
	}
	if w < 0 {
		w = len(h.times)
		h.times = append(h.times, handoffWhen{since, deadline})
	}
	h.items = append(h.items, handoffItem{int32(slot), int32(from), int32(to), int32(w)})
}

// HandoffsOf keeps hs compactly, sorted by queue (a record's or a test's list).
func HandoffsOf(hs []model.Handoff) Handoffs {
	if len(hs) == 0 {
		return Handoffs{}
	}
	t := newTableBuilder()
	for _, h := range hs {
		t.addOne(h.Queue)
	}
	t.build()
	keyOf := map[string]int{}
	var keys []string
	key := func(k string) int {
		i, ok := keyOf[k]
		if !ok {
			i = len(keys)
			keyOf[k] = i
			keys = append(keys, k)
		}
		return i
	}
	sorted := slices.Clone(hs)
	slices.SortStableFunc(sorted, func(a, b model.Handoff) int { return abi.CompareQueues(a.Queue, b.Queue) })
	out := Handoffs{table: t, items: make([]handoffItem, 0, len(hs))}
	for _, x := range sorted {
		from, to := key(x.From), key(x.To)
		out.Add(t.Index(x.Queue), from, to, x.Since, x.Deadline)
	}
	out.keys = keys
	return out
}

// Len is the number of handoffs.
func (h *Handoffs) Len() int { return len(h.items) }

// Queue is the queue of handoff i. It looks the queue's broker up: Queues walks them all for
// less.
func (h *Handoffs) Queue(i int) abi.Queue { return h.table.QueueAt(int(h.items[i].slot)) }

// Queues yields each handoff's index and queue, in order, following the brokers of the queue
// table along the handoffs' slots instead of looking each one up.
func (h *Handoffs) Queues() iter.Seq2[int, abi.Queue] {
	return func(yield func(int, abi.Queue) bool) {
		b := -1
		var tb *tableBroker
		for i, it := range h.items {
			s := int(it.slot)
			if tb == nil || s >= tb.base+len(tb.ids) {
				if b++; b >= len(h.table.brokers) || s >= h.table.brokers[b].base+len(h.table.brokers[b].ids) {
					b = h.table.brokerOf(s)
				}
				tb = &h.table.brokers[b]
			}
			if !yield(i, abi.Queue{Topic: tb.topic, BrokerName: tb.name, QueueID: tb.ids[s-tb.base]}) {
				return
			}
		}
	}
}

// SlotIn is the slot in t of handoff i's queue, -1 when t lacks it: its own when the handoffs
// are over t, without a lookup. Only Index's memory of its last broker is written in t.
func (h *Handoffs) SlotIn(t *QueueTable, i int) int {
	if t == h.table {
		return int(h.items[i].slot)
	}
	return t.Index(h.Queue(i))
}

// From is the member key of handoff i's previous owner.
func (h *Handoffs) From(i int) string { return h.keys[h.items[i].from] }

// To is the member key of handoff i's new owner.
func (h *Handoffs) To(i int) string { return h.keys[h.items[i].to] }

// Since is when handoff i began.
func (h *Handoffs) Since(i int) time.Time { return h.times[h.items[i].when].since }

// Deadline is handoff i's deadline.
func (h *Handoffs) Deadline(i int) time.Time { return h.times[h.items[i].when].deadline }

// same reports whether handoffs i and j share their members and times, as their indices tell.
func (h *Handoffs) same(i, j int) bool { return h.runKey(i) == h.runKey(j) }

// runKey is what handoff i shares with the others of its run in a record: its members' and
// times' indices.
func (h *Handoffs) runKey(i int) [3]int32 {
	it := &h.items[i]
	return [3]int32{it.from, it.to, it.when}
}

// Search finds q's handoff: its index and true, or false when q is not handed off.
func (h *Handoffs) Search(q abi.Queue) (int, bool) {
	if len(h.items) == 0 {
		return 0, false
	}
	slot := h.table.IndexOf(q)
	if slot < 0 {
		return 0, false
	}
	return slices.BinarySearchFunc(h.items, int32(slot), func(it handoffItem, s int32) int { return cmp.Compare(it.slot, s) })
}

// List is the handoffs as model values, in queue order; nil when there are none.
func (h *Handoffs) List() []model.Handoff {
	if len(h.items) == 0 {
		return nil
	}
	out := make([]model.Handoff, len(h.items))
	for i, q := range h.Queues() {
		out[i] = model.Handoff{Queue: q, From: h.From(i), To: h.To(i), Since: h.Since(i), Deadline: h.Deadline(i)}
	}
	return out
}
