package abi

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"unsafe"
)

// Magic numbers of the two messages.
const (
	RequestMagic  = "ALRQ"
	ResponseMagic = "ALRS"
)

// Section kinds of a request (ABI.md, "Request").
const (
	SectionStrings         = 1
	SectionMeta            = 2
	SectionQueues          = 3
	SectionConsumers       = 4
	SectionTargets         = 5
	SectionConfig          = 6
	SectionQueueLabels     = 7
	SectionQueueMetrics    = 8
	SectionConsumerLabels  = 9
	SectionConsumerMetrics = 10
	SectionPrevOwners      = 11
)

const (
	headerSize = 16
	dirEntry   = 12
	// NoString marks an absent string reference (a queue without a previous owner).
	NoString = 0xFFFFFFFF
	// MaxMessage is the largest message either side accepts: 1 GiB keeps every offset and
	// count well inside uint32 and int on 32-bit guests.
	MaxMessage = 1 << 30
)

var le = binary.LittleEndian

// Encoder writes requests. It keeps its scratch space between calls, so reuse one per goroutine;
// the zero value is ready to use.
type Encoder struct {
	// index maps the table's strings to their ids, except those in small (while nsmall >= 0, the
	// table's first nsmall strings, which intern compares one by one) and in pending.
	index   map[string]uint32
	small   [maxLinearStrings]string
	nsmall  int
	offsets []uint32
	blob    []byte
	keys    []string
	// pending are consumer ids in the table but not yet in index, with their ids (appendConsumers).
	pending    []string
	pendingIDs []uint32
	// pendingLookups counts the strings interned while pending was set (intern).
	pendingLookups int
	// order asks the queue loop to check canonical order as it writes; unsorted is its finding.
	order, unsorted bool
	// sorted: EncodeCanonical has seen the consumers in order; distinct: strictly increasing;
	// cachedIDs: they are the consumer cache's list (consumerCache.same).
	sorted, distinct, cachedIDs bool
	// checked is the consumer list that EncodeCanonical last found strictly increasing (for
	// Encoder.CheckOwners), or nil.
	checked []string
	// queues is the last QUEUES section, for appendQueuesCached; with recording, record collects
	// the strings appendQueues interns, in order.
	queues    queueCache
	record    []string
	recording bool
	// consumers is the last CONSUMERS section written in order, for appendConsumers.
	consumers consumerCache
}

// consumerCache is what appendConsumers wrote for the last consumer list it took in order: the
// list's string headers (equal headers: equal strings, which are immutable), the string table
// before it (offsets and bytes), the ids it gave the list, and what it added to the table. A
// request with the same list after the same table gets all of it copied instead of written id by
// id, and EncodeCanonical takes its order from it (known: the order EncodeCanonical found).
type consumerCache struct {
	ids                 []string
	offsetsBefore       []uint32
	blobBefore          []byte
	pendingIDs          []uint32
	offsetsAdded        []uint32
	blobAdded           []byte
	known, distinct, ok bool
}

// same reports whether list is the cached one, string header by string header.
func (c *consumerCache) same(list []string) bool {
	return c.ok && len(list) == len(c.ids) && bytes.Equal(stringHeaders(list), stringHeaders(c.ids))
}

// stringHeaders is list's string headers as raw memory.
func stringHeaders(list []string) []byte {
	if len(list) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&list[0])), len(list)*int(unsafe.Sizeof("")))
}

type queueCache struct {
	group    string
	qs       []Queue
	names    []string
	section  []byte
	unsorted bool
	// frozen: qs is the caller's slice (Request.QueuesFrozen), not a copy of its own.
	frozen bool
}

// EncodeCanonical is Canonicalize(r) followed by Encode, with the queues' order checked in the
// encoding pass: a request already in canonical order, as the daemon builds them, costs one pass
// over its queues instead of two (RATIONALE.md). An unsorted one is sorted and encoded again.
func (e *Encoder) EncodeCanonical(dst []byte, r *Request) ([]byte, error) {
	e.checked = nil
	var distinct bool
	cached := e.consumers.known && e.consumers.same(r.Consumers)
	if cached {
		distinct = e.consumers.distinct // in order when it was cached, and the same strings since
	} else if distinct = increasing(r.Consumers); !distinct && !slices.IsSorted(r.Consumers) {
		Canonicalize(r)
	}
	e.order, e.unsorted, e.sorted, e.distinct, e.cachedIDs = true, false, true, distinct, cached
	out, err := e.Encode(dst, r)
	e.order, e.sorted, e.distinct, e.cachedIDs = false, false, false, false
	if err == nil && e.unsorted {
		Canonicalize(r) // the queues: the consumers are in order already
		out, err = e.Encode(out[:len(dst)], r)
	}
	if err == nil && distinct {
		e.checked = r.Consumers
	}
	return out, err
}

// CheckOwners is abi.CheckOwners for the request that EncodeCanonical encoded last, unchanged
// since: where the encoding found its consumer ids strictly increasing (so none repeats), it
// spares CheckOwners its own pass over them. For any other request it is abi.CheckOwners.
func (e *Encoder) CheckOwners(r *Request, owners []int32) error {
	if !e.encodedDistinct(r) {
		return CheckOwners(r, owners)
	}
	return checkOwners(r, owners, nil)
}

// CheckedOwnerLists is CheckOwners and then OwnerLists in one pass over the owners, sparing, as
// CheckOwners does, the pass over the consumer ids of the request EncodeCanonical encoded last:
// an owner-form answer to r is checked as Validate checks it, and consumer index o's queues are
// flat[bounds[o]:bounds[o+1]], in mqAll order (none for an index that repeats an earlier id). A
// caller that builds every consumer's list itself (the embedding API's Assignment) spares the
// check's own pass (RATIONALE.md).
func (e *Encoder) CheckedOwnerLists(r *Request, owners []int32) (flat, bounds []int, err error) {
	var first []int32
	if !e.encodedDistinct(r) {
		first = firstOwners(r.Consumers)
	}
	return checkedOwnerLists(r, owners, first)
}

// Validate is abi.Validate, sparing an owner-form answer to the request that EncodeCanonical
// encoded last, unchanged since, the pass over its consumer ids that CheckOwners spares.
func (e *Encoder) Validate(r *Request, resp *Response) error {
	if resp.Owners == nil || !e.encodedDistinct(r) {
		return Validate(r, resp)
	}
	return resolveOwners(r, resp, nil)
}

// encodedDistinct reports whether r's consumers are those EncodeCanonical found strictly increasing.
func (e *Encoder) encodedDistinct(r *Request) bool {
	c := e.checked
	return len(c) > 0 && len(c) == len(r.Consumers) && &c[0] == &r.Consumers[0]
}

// EncodeRequest appends r's encoding to dst and returns the extended slice. It is a convenience
// for one-off use; hot paths keep an Encoder.
func EncodeRequest(dst []byte, r *Request) ([]byte, error) {
	var e Encoder
	return e.Encode(dst, r)
}

// Encode appends r's encoding to dst. It refuses a request whose parallel slices do not match
// their lists or whose encoding would exceed MaxMessage.
func (e *Encoder) Encode(dst []byte, r *Request) ([]byte, error) {
	if r.QueueAttrs != nil && len(r.QueueAttrs) != len(r.Queues) {
		return dst, errorf("request has %d queue attributes for %d queues", len(r.QueueAttrs), len(r.Queues))
	}
	if r.ConsumerAttrs != nil && len(r.ConsumerAttrs) != len(r.Consumers) {
		return dst, errorf("request has %d consumer attributes for %d consumers", len(r.ConsumerAttrs), len(r.Consumers))
	}
	if r.PrevOwners != nil && len(r.PrevOwners) != len(r.Queues) {
		return dst, errorf("request has %d previous owners for %d queues", len(r.PrevOwners), len(r.Queues))
	}
	if e.index == nil {
		e.index = make(map[string]uint32)
	} else if e.nsmall < 0 { // else the map is empty: the last encoding never used it
		clear(e.index)
	}
	e.offsets = append(e.offsets[:0], 0)
	e.blob = e.blob[:0]
	e.pending = nil
	e.nsmall = 0 // e.small is clear: every encoding clears it at its end

	kinds := []uint32{SectionMeta, SectionQueues, SectionConsumers}
	if r.Targets != nil {
		kinds = append(kinds, SectionTargets)
	}
	if r.Config != nil {
		kinds = append(kinds, SectionConfig)
	}
	if r.QueueAttrs != nil {
		kinds = append(kinds, SectionQueueLabels, SectionQueueMetrics)
	}
	if r.ConsumerAttrs != nil {
		kinds = append(kinds, SectionConsumerLabels, SectionConsumerMetrics)
	}
	if r.PrevOwners != nil {
		kinds = append(kinds, SectionPrevOwners)
	}
	kinds = append(kinds, SectionStrings) // last: only now is the table complete

	start := len(dst)
	dst = append(dst, RequestMagic...)
	dst = le.AppendUint16(dst, Major)
	dst = le.AppendUint16(dst, Minor)
	dst = le.AppendUint32(dst, 0) // total length, patched at the end
	dst = le.AppendUint32(dst, uint32(len(kinds)))
	dir := len(dst)
	dst = append(dst, make([]byte, dirEntry*len(kinds))...)

	for n, kind := range kinds {
		off := len(dst)
		switch kind {
		case SectionMeta:
			dst = le.AppendUint32(dst, e.intern(r.Group))
			dst = le.AppendUint32(dst, 0)
		case SectionQueues:
			dst = e.appendQueuesCached(dst, r.Group, r.Queues, r.QueuesFrozen)
		case SectionConsumers:
			dst = e.appendConsumers(dst, r.Consumers)
		case SectionTargets:
			dst = e.appendStrings(dst, r.Targets)
		case SectionConfig:
			e.keys = sortedKeys(e.keys[:0], r.Config)
			dst = le.AppendUint32(dst, uint32(len(e.keys)))
			for _, k := range e.keys {
				dst = le.AppendUint32(dst, e.intern(k))
				dst = le.AppendUint32(dst, e.intern(r.Config[k]))
			}
		case SectionQueueLabels:
			dst = e.appendLabels(dst, r.QueueAttrs)
		case SectionQueueMetrics:
			dst = e.appendMetrics(dst, r.QueueAttrs)
		case SectionConsumerLabels:
			dst = e.appendLabels(dst, r.ConsumerAttrs)
		case SectionConsumerMetrics:
			dst = e.appendMetrics(dst, r.ConsumerAttrs)
		case SectionPrevOwners:
			dst = le.AppendUint32(dst, uint32(len(r.PrevOwners)))
			// A previous owner is usually one of the consumers' own strings, repeated for each
			// of its queues: a small table by string address answers those without hashing the
			// string (equal address and length: equal strings). A whole-group call of 1,024
			// queues spent a sixth of its host side on the map (RATIONALE.md).
			var recent [256]struct {
				p  *byte
				n  int
				id uint32
			}
			for _, o := range r.PrevOwners {
				id := uint32(NoString)
				if o != "" {
					p := unsafe.StringData(o)
					slot := &recent[uint64(uintptr(unsafe.Pointer(p)))*0x9E3779B97F4A7C15>>56]
					if slot.p == p && slot.n == len(o) {
						id = slot.id
					} else {
						id = e.intern(o)
						slot.p, slot.n, slot.id = p, len(o), id
					}
				}
				dst = le.AppendUint32(dst, id)
			}
		case SectionStrings:
			count := len(e.offsets) - 1
			dst = le.AppendUint32(dst, uint32(count))
			dst = appendWords(dst, e.offsets)
			dst = append(dst, e.blob...)
		}
		// Every section starts 4-byte aligned.
		for (len(dst)-start)%4 != 0 {
			dst = append(dst, 0)
		}
		le.PutUint32(dst[dir+n*dirEntry:], kind)
		le.PutUint32(dst[dir+n*dirEntry+4:], uint32(off-start))
		le.PutUint32(dst[dir+n*dirEntry+8:], uint32(len(dst)-off))
	}
	e.pending = nil                      // the caller's consumers: not kept
	e.small = [maxLinearStrings]string{} // the caller's strings: not kept
	if len(dst)-start > MaxMessage {
		return dst[:start], errorf("request of %d bytes exceeds the %d-byte limit", len(dst)-start, MaxMessage)
	}
	le.PutUint32(dst[start+8:], uint32(len(dst)-start))
	return dst, nil
}

// appendQueues writes QUEUES: the count, then a record per queue. Queues arrive sorted, so
// topics and brokers repeat in runs that share their strings: the map is consulted only when a
// run's strings change (by pointer: a run of equal but separate strings only costs lookups), and
// with e.order the canonical order is checked on the way, by queue id within a run.
func (e *Encoder) appendQueues(dst []byte, qs []Queue) []byte {
	dst = le.AppendUint32(dst, uint32(len(qs)))
	n := len(dst)
	dst = slices.Grow(dst, 12*len(qs))[:n+12*len(qs)]
	out := dst[n:]
	unsorted := false
	for i := 0; i < len(qs); {
		// A run: the queues from i on that share the strings of queue i.
		q := &qs[i]
		names := uint64(e.intern(q.Topic)) | uint64(e.intern(q.BrokerName))<<32
		if e.recording {
			e.record = append(e.record, q.Topic, q.BrokerName)
		}
		if i > 0 && CompareQueues(qs[i-1], *q) > 0 {
			unsorted = true
		}
		run := *namesOf(q)
		// order ORs the differences of consecutive queue ids: its sign bit is set when one
		// decreases. A branch per queue costs more than the arithmetic (RATIONALE.md).
		order := int64(0)
		prev := int64(q.QueueID)
		rec := out[12*i:]
		j := i
		for ; j < len(qs) && len(rec) >= 12; j++ {
			p := &qs[j]
			if *namesOf(p) != run {
				break
			}
			id := int64(p.QueueID)
			order |= id - prev
			prev = id
			le.PutUint64(rec, names)
			le.PutUint32(rec[8:12], uint32(id))
			rec = rec[12:]
		}
		unsorted = unsorted || order < 0
		i = j
	}
	if e.order && unsorted {
		e.unsorted = true
	}
	return dst
}

// appendQueuesCached is appendQueues that reuses the last request's QUEUES section when the
// group and the queues are the same: the same Queue values, string headers included (equal
// headers mean equal strings, which are immutable), compared as raw memory in one memequal. A
// rebalance usually changes the consumers, not the queues, and a whole-group call of 1,024 queues
// spent a fifth of its host side on writing the records (RATIONALE.md). A miss costs the
// comparison, which stops at the first difference, and a copy of the queues. With frozen
// (Request.QueuesFrozen) the cache keeps qs itself, and the same slice again compares equal by
// address alone (memequal's first test).
func (e *Encoder) appendQueuesCached(dst []byte, group string, qs []Queue, frozen bool) []byte {
	c := &e.queues
	if len(qs) > 0 && len(qs) == len(c.qs) && group == c.group && bytes.Equal(queueBytes(qs), queueBytes(c.qs)) {
		for _, s := range c.names { // the same strings in the same order: the same ids
			e.intern(s)
		}
		if e.order && c.unsorted {
			e.unsorted = true
		}
		return append(dst, c.section...)
	}
	start := len(dst)
	order, unsorted := e.order, e.unsorted
	e.order, e.unsorted, e.record, e.recording = true, false, e.record[:0], true
	dst = e.appendQueues(dst, qs)
	switch {
	case frozen:
		c.qs, c.frozen = qs, true
	case c.frozen: // c.qs is a caller's frozen slice: never written
		c.qs, c.frozen = slices.Clone(qs), false
	default:
		c.qs = append(c.qs[:0], qs...)
	}
	c.group = group
	c.names = append(c.names[:0], e.record...)
	c.unsorted = e.unsorted
	c.section = append(c.section[:0], dst[start:]...)
	e.order, e.recording = order, false
	e.unsorted = unsorted || order && c.unsorted
	return dst
}

// queueBytes is the memory of qs.
func queueBytes(qs []Queue) []byte {
	if len(qs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&qs[0])), len(qs)*int(unsafe.Sizeof(Queue{})))
}

// namesOf gives the string headers of q's Topic and BrokerName, adjacent in Queue, as one value:
// two queues whose names share storage compare equal in four word comparisons.
func namesOf(q *Queue) *[4]uintptr { return (*[4]uintptr)(unsafe.Pointer(&q.Topic)) }

// Queue's layout as namesOf reads it: BrokerName right after Topic.
const _ = -uint(unsafe.Offsetof(Queue{}.BrokerName) - unsafe.Sizeof(""))

// sameString is a == b, answering without comparing bytes when both share their storage, as the
// topic and broker names of one topic's queues usually do.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// intern returns the string's index in the table, adding it once. While consumer ids are pending
// (appendConsumers: sorted, not in the map), the first few strings after them (a binding's
// config) are looked up among them by binary search, and only a section that interns more (labels,
// previous owners) moves them into the map: 64 map insertions were 15k instructions of a
// whole-group call whose only later strings are "vnodes" and "10" (RATIONALE.md).
func (e *Encoder) intern(s string) uint32 {
	if e.nsmall >= 0 {
		// A table of a few strings, none in the map yet (the group, topics and brokers, usually):
		// compared one by one, which costs less than hashing each into the map.
		if e.pending == nil {
			for id, t := range e.small[:e.nsmall] {
				if t == s {
					return uint32(id)
				}
			}
			if e.nsmall < len(e.small) {
				id := e.append(s)
				e.small[e.nsmall] = s
				e.nsmall++
				return id
			}
		}
		e.indexSmall()
	}
	if e.pending != nil {
		if e.pendingLookups < maxLinearStrings {
			e.pendingLookups++
			if id, ok := e.index[s]; ok {
				return id
			}
			if k, ok := slices.BinarySearch(e.pending, s); ok {
				return e.pendingIDs[k] // the first of a repeated id: the same id for every copy
			}
			return e.add(s)
		}
		e.indexPending()
	}
	if id, ok := e.index[s]; ok {
		return id
	}
	return e.add(s)
}

// indexSmall puts the strings intern kept out of the map, e.small[:e.nsmall], into it, for good
// in this encoding.
func (e *Encoder) indexSmall() {
	for id, t := range e.small[:e.nsmall] {
		e.index[t] = uint32(id)
	}
	e.nsmall = -1
}

// add appends s to the table and the map.
func (e *Encoder) add(s string) uint32 {
	id := e.append(s)
	e.index[s] = id
	return id
}

// append adds s to the table, not to the map, and returns its id.
func (e *Encoder) append(s string) uint32 {
	id := uint32(len(e.offsets) - 1)
	e.blob = append(e.blob, s...)
	e.offsets = append(e.offsets, uint32(len(e.blob)))
	return id
}

// appendConsumers writes CONSUMERS. cidAll usually arrives sorted, so a repeated id follows
// itself, and few strings (group, topics, brokers) precede it in the table: then each id is
// compared with its predecessor and those few strings instead of going through the map, and the
// ids join the map only if a later section interns a string (indexPending). Map insertions were a
// tenth of a whole-group call's host side (RATIONALE.md). What that path wrote is kept
// (consumerCache): the same ids after the same strings get it copied, a fifth of averagely's
// owner-form call of 1,024 x 64 (RATIONALE.md, "Why an Encoder keeps its last consumer section").
func (e *Encoder) appendConsumers(dst []byte, list []string) []byte {
	before := len(e.offsets) - 1 // strings in the table before the consumers
	n := len(list)
	if c := &e.consumers; (e.cachedIDs || c.same(list)) && slices.Equal(e.offsets, c.offsetsBefore) && bytes.Equal(e.blob, c.blobBefore) {
		// The same ids after the same table as the last time: the same section and additions.
		dst = le.AppendUint32(dst, uint32(n))
		e.pendingIDs = append(e.pendingIDs[:0], c.pendingIDs...)
		e.offsets = append(e.offsets, c.offsetsAdded...)
		e.blob = append(e.blob, c.blobAdded...)
		e.pending, e.pendingLookups = list, 0
		return appendWords(dst, e.pendingIDs)
	}
	if before > maxLinearStrings || !e.sorted && !slices.IsSorted(list) {
		return e.appendStrings(dst, list)
	}
	// The ids are kept, into storage grown once, and written after the count in one copy.
	dst = le.AppendUint32(dst, uint32(n))
	e.pendingIDs = slices.Grow(e.pendingIDs[:0], n)[:n]
	e.offsets = slices.Grow(e.offsets, n)
	// lengths has bit l set when a string before the consumers is l bytes long (l < 64): an id of
	// another length is none of them, and most ids are settled without comparing bytes.
	var lengths uint64
	for id := range before {
		lengths |= 1 << min(e.offsets[id+1]-e.offsets[id], 63)
	}
	var id uint32
	for i, s := range list {
		if i == 0 || e.distinct || s != list[i-1] { // else the same id as the one before
			if lengths&(1<<min(len(s), 63)) == 0 {
				id = uint32(len(e.offsets) - 1)
				e.blob = append(e.blob, s...)
				e.offsets = append(e.offsets, uint32(len(e.blob)))
			} else if k := e.earlier(s, before); k >= 0 {
				id = uint32(k)
			} else {
				id = uint32(len(e.offsets) - 1)
				e.blob = append(e.blob, s...)
				e.offsets = append(e.offsets, uint32(len(e.blob)))
			}
		}
		e.pendingIDs[i] = id
	}
	e.pending, e.pendingLookups = list, 0
	e.keepConsumers(list, before)
	return appendWords(dst, e.pendingIDs)
}

// keepConsumers caches what appendConsumers wrote for list, whose ids the table has from string
// before on (consumerCache). A list the cache does not know costs this copy (16 bytes an id, its
// bytes and two words) besides its encoding.
func (e *Encoder) keepConsumers(list []string, before int) {
	c := &e.consumers
	at := e.offsets[before] // the table's bytes before the ids
	c.ids = append(c.ids[:0], list...)
	c.offsetsBefore = append(c.offsetsBefore[:0], e.offsets[:before+1]...)
	c.blobBefore = append(c.blobBefore[:0], e.blob[:at]...)
	c.pendingIDs = append(c.pendingIDs[:0], e.pendingIDs...)
	c.offsetsAdded = append(c.offsetsAdded[:0], e.offsets[before+1:]...)
	c.blobAdded = append(c.blobAdded[:0], e.blob[at:]...)
	c.known, c.distinct, c.ok = e.sorted, e.distinct, true
}

// maxLinearStrings bounds the strings appendConsumers compares each consumer id with.
const maxLinearStrings = 8

// earlier returns the id of s among the table's first n strings, or -1.
func (e *Encoder) earlier(s string, n int) int {
	for id := range n {
		if string(e.blob[e.offsets[id]:e.offsets[id+1]]) == s {
			return id
		}
	}
	return -1
}

// indexPending adds the consumer ids appendConsumers left out of the map.
func (e *Encoder) indexPending() {
	pending := e.pending
	e.pending = nil
	for k, s := range pending {
		e.index[s] = e.pendingIDs[k]
	}
}

func (e *Encoder) appendStrings(dst []byte, list []string) []byte {
	dst = le.AppendUint32(dst, uint32(len(list)))
	for _, s := range list {
		dst = le.AppendUint32(dst, e.intern(s))
	}
	return dst
}

func (e *Encoder) appendLabels(dst []byte, attrs []Attrs) []byte {
	countAt := len(dst)
	dst = le.AppendUint32(dst, 0)
	count := 0
	for i, a := range attrs {
		e.keys = sortedKeys(e.keys[:0], a.Labels)
		for _, k := range e.keys {
			dst = le.AppendUint32(dst, uint32(i))
			dst = le.AppendUint32(dst, e.intern(k))
			dst = le.AppendUint32(dst, e.intern(a.Labels[k]))
			count++
		}
	}
	le.PutUint32(dst[countAt:], uint32(count))
	return dst
}

func (e *Encoder) appendMetrics(dst []byte, attrs []Attrs) []byte {
	countAt := len(dst)
	dst = le.AppendUint32(dst, 0)
	count := 0
	for i, a := range attrs {
		e.keys = sortedKeys(e.keys[:0], a.Metrics)
		for _, k := range e.keys {
			dst = le.AppendUint32(dst, uint32(i))
			dst = le.AppendUint32(dst, e.intern(k))
			dst = le.AppendUint64(dst, uint64(a.Metrics[k]))
			count++
		}
	}
	le.PutUint32(dst[countAt:], uint32(count))
	return dst
}

func sortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.SortFunc(dst, strings.Compare)
	return dst
}

// appendWords appends vs to dst as little-endian 4-byte words: one copy where the machine stores
// them as the wire does (wasm is little-endian).
func appendWords[T int32 | uint32](dst []byte, vs []T) []byte {
	if littleEndian && len(vs) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&vs[0])), 4*len(vs))...)
	}
	for _, v := range vs {
		dst = le.AppendUint32(dst, uint32(v))
	}
	return dst
}
