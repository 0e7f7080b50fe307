package store

import (
	"cmp"
	"slices"
	"strings"
	"unsafe"

	"github.com/allocd/allocd/abi"
)

// QueueTable numbers the distinct queues of some queue lists in canonical order (topic, broker,
// id): Index(q) is q's slot, Queue(i) the queue in slot i. It lets a 100,000-queue generation be
// compared, diffed and packed over slices indexed by slot instead of maps keyed by queue. It is
// built per broker, so that 100,000 queues are never sorted as structs: a broker whose ids are
// few and close together (the usual 0..n-1) is numbered through a presence bitmap, without
// sorting at all. Index and Queue remember the last broker they looked up, so a table is not
// safe for concurrent use through them; IndexOf and QueueAt only read it.
type QueueTable struct {
	brokers []tableBroker
	byName  map[[2]string]int
	// byBroker finds a broker by name alone while every broker is of one topic (topic): a
	// string-keyed map costs a fraction of a lookup by (topic, broker).
	byBroker map[string]int
	topic    string
	oneTopic bool
	last     int // the broker of the previous lookup: lists run along one broker
	n        int
	// list is the table's queues in slot order when Align accepted it: a stretch of its array
	// is numbered by Span without a lookup.
	list []abi.Queue
}

type tableBroker struct {
	topic, name string
	ids         []int32 // sorted, distinct
	base        int     // the table index of ids[0]
	dense       bool    // ids run from ids[0] without a gap: Index is arithmetic
}

// NewQueueTable builds the table of the queues of the lists of some assignments.
func NewQueueTable(ms ...map[string][]abi.Queue) *QueueTable {
	t := newTableBuilder()
	for _, m := range ms {
		for _, qs := range m {
			t.add(qs)
		}
	}
	return t.build()
}

// QueueTableOf builds the table of the queues of some lists.
func QueueTableOf(lists ...[]abi.Queue) *QueueTable {
	t := newTableBuilder()
	for _, qs := range lists {
		t.add(qs)
	}
	return t.build()
}

func newTableBuilder() *QueueTable {
	return &QueueTable{byName: map[[2]string]int{}, byBroker: map[string]int{}, oneTopic: true, last: -1}
}

func (t *QueueTable) add(qs []abi.Queue) {
	for _, q := range qs {
		t.addOne(q)
	}
}

func (t *QueueTable) addOne(q abi.Queue) {
	b := t.broker(q)
	if b < 0 {
		b = len(t.brokers)
		if b == 0 {
			t.topic = q.Topic
		}
		t.oneTopic = t.oneTopic && q.Topic == t.topic
		t.byName[[2]string{q.Topic, q.BrokerName}] = b
		t.byBroker[q.BrokerName] = b
		t.brokers = append(t.brokers, tableBroker{topic: q.Topic, name: q.BrokerName})
	}
	t.last = b
	t.brokers[b].ids = append(t.brokers[b].ids, q.QueueID)
}

func (t *QueueTable) build() *QueueTable {
	slices.SortFunc(t.brokers, func(a, b tableBroker) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), strings.Compare(a.name, b.name))
	})
	base := 0
	var seen []bool
	for i := range t.brokers {
		b := &t.brokers[i]
		t.byName[[2]string{b.topic, b.name}] = i
		t.byBroker[b.name] = i
		lo, hi := slices.Min(b.ids), slices.Max(b.ids)
		if span := int64(hi) - int64(lo) + 1; span <= 2*int64(len(b.ids))+1024 {
			// Close together: mark them, then read them back in order.
			seen = slices.Grow(seen[:0], int(span))[:span]
			clear(seen)
			for _, id := range b.ids {
				seen[id-lo] = true
			}
			ids := b.ids[:0]
			for k, ok := range seen {
				if ok {
					ids = append(ids, lo+int32(k))
				}
			}
			b.ids = ids
		} else {
			slices.Sort(b.ids)
			b.ids = slices.Compact(b.ids)
		}
		b.ids = slices.Clip(b.ids)
		b.dense = int(b.ids[len(b.ids)-1]-b.ids[0]) == len(b.ids)-1
		b.base = base
		base += len(b.ids)
	}
	t.n = base
	t.last = -1
	return t
}

// Len is the number of queues in the table.
func (t *QueueTable) Len() int { return t.n }

// broker is the position of q's broker in t.brokers, -1 if none.
func (t *QueueTable) broker(q abi.Queue) int {
	if t.last >= 0 {
		if b := &t.brokers[t.last]; b.name == q.BrokerName && b.topic == q.Topic {
			return t.last
		}
	}
	return t.brokerNamed(q)
}

// brokerNamed is broker without the memory of the last lookup.
func (t *QueueTable) brokerNamed(q abi.Queue) int {
	if t.oneTopic {
		if b, ok := t.byBroker[q.BrokerName]; ok && q.Topic == t.topic {
			return b
		}
		return -1
	}
	if b, ok := t.byName[[2]string{q.Topic, q.BrokerName}]; ok {
		return b
	}
	return -1
}

// Index is q's slot in the table, -1 when q is not one of its queues.
func (t *QueueTable) Index(q abi.Queue) int {
	b := t.broker(q)
	if b < 0 {
		return -1
	}
	t.last = b
	return t.slotIn(b, q)
}

// IndexOf is Index without the memory of the last broker looked up, which Index keeps: it only
// reads the table, so goroutines may call it together once the table is built.
func (t *QueueTable) IndexOf(q abi.Queue) int {
	b := t.brokerNamed(q)
	if b < 0 {
		return -1
	}
	return t.slotIn(b, q)
}

// slotIn is q's slot among broker b's queues, -1 when it is not one of them.
func (t *QueueTable) slotIn(b int, q abi.Queue) int {
	tb := &t.brokers[b]
	if tb.dense {
		if q.QueueID < tb.ids[0] || int(q.QueueID-tb.ids[0]) >= len(tb.ids) {
			return -1
		}
		return tb.base + int(q.QueueID-tb.ids[0])
	}
	i, ok := slices.BinarySearch(tb.ids, q.QueueID)
	if !ok {
		return -1
	}
	return tb.base + i
}

// Align reports whether list is the table's queues in slot order (list[i] in slot i), and when
// it is, keeps it: a list that is a stretch of list's array (a slice of it, as a generation's
// lists often are of the topic's read queues) is then numbered by Span without looking its
// queues up. list must not be written afterwards.
func (t *QueueTable) Align(list []abi.Queue) bool {
	if len(list) != t.n {
		return false
	}
	for i, q := range list {
		if t.Index(q) != i {
			return false
		}
	}
	t.list = list
	return true
}

// Span reports whether qs is a stretch of the list Align kept, and if so the slot of qs[0]:
// qs[k] is then in slot first+k. It tells by where qs's array starts, and then checks that
// address is the list's element at that offset, so that a list merely equal to a stretch, or
// stored elsewhere, is never taken for one.
func (t *QueueTable) Span(qs []abi.Queue) (first int, ok bool) {
	if len(qs) == 0 || len(qs) > len(t.list) {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(t.list)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(qs)))
	if p < base {
		return 0, false
	}
	off := (p - base) / unsafe.Sizeof(abi.Queue{})
	if off > uintptr(len(t.list)-len(qs)) || &t.list[off] != &qs[0] {
		return 0, false
	}
	return int(off), true
}

// AppendSlots appends the slot of each queue of qs to dst, -1 for a queue not in the table: a
// stretch of the aligned list (Span) by arithmetic, another list by lookup.
func (t *QueueTable) AppendSlots(dst []int32, qs []abi.Queue) []int32 {
	if first, ok := t.Span(qs); ok {
		for k := range qs {
			dst = append(dst, int32(first+k))
		}
		return dst
	}
	for _, q := range qs {
		dst = append(dst, int32(t.Index(q)))
	}
	return dst
}

// Queue is the queue in slot i, which must be in [0, Len()).
func (t *QueueTable) Queue(i int) abi.Queue {
	b := t.last
	if b < 0 || i < t.brokers[b].base || i >= t.brokers[b].base+len(t.brokers[b].ids) {
		b = t.brokerOf(i)
		t.last = b
	}
	tb := &t.brokers[b]
	return abi.Queue{Topic: tb.topic, BrokerName: tb.name, QueueID: tb.ids[i-tb.base]}
}

// QueueAt is Queue without the memory of the last broker looked up: it only reads the table,
// so goroutines may call it together once the table is built.
func (t *QueueTable) QueueAt(i int) abi.Queue {
	tb := &t.brokers[t.brokerOf(i)]
	return abi.Queue{Topic: tb.topic, BrokerName: tb.name, QueueID: tb.ids[i-tb.base]}
}

// brokerOf is the position in t.brokers of the broker of slot i.
func (t *QueueTable) brokerOf(i int) int {
	b, _ := slices.BinarySearchFunc(t.brokers, i, func(tb tableBroker, i int) int {
		return cmp.Compare(tb.base+len(tb.ids)-1, i)
	})
	return b
}

// runs lists the table as runs of consecutive ids.
func (t *QueueTable) runs() []queueRun {
	var out []queueRun
	for _, b := range t.brokers {
		for i, id := range b.ids {
			if i > 0 && b.ids[i-1]+1 == id {
				out[len(out)-1].Count++
				continue
			}
			out = append(out, queueRun{Topic: b.topic, Broker: b.name, First: id, Count: 1})
		}
	}
	return out
}
