package abi

import (
	"bytes"
	"slices"
	"unsafe"
)

// View is a parsed request that reads fields straight from the encoded bytes: the number of
// queues, queue i or consumer j cost a few loads, with nothing decoded up front. ParseRequest
// checks the structure once, so every accessor is safe on any input it accepted; a reader of
// queue records checks Err afterwards.
//
// Strings returned by a View alias the encoded bytes, which must not change afterwards, unless
// DetachStrings moved them elsewhere.
type View struct {
	buf       []byte
	nstr      int
	offs      []byte // STRINGS offsets, nstr+1 little-endian uint32
	blob      []byte
	group     uint32
	queues    []byte // 12-byte records
	consumers []byte // uint32 string ids
	targets   []byte // uint32 string ids; nil when the section is absent
	hasTarget bool
	config    []byte
	qlabels   []byte
	qmetrics  []byte
	clabels   []byte
	cmetrics  []byte
	prev      []byte
	hasQAttr  bool
	hasCAttr  bool
	first     []int32 // string id -> first consumer index, built on demand
	hasFirst  bool
	// increasing: the consumers' string ids strictly increase, as the Go writer's ids of a
	// canonical cidAll without a repeat do (Parse notes it as it checks them).
	increasing bool
	// nonEmpty: no string of the table is empty (Parse notes it as it checks the offsets), so
	// no consumer id is.
	nonEmpty bool
	err      error // the first bad queue record an accessor met; see Err
	// store: DetachStrings' store, until the table is copied (the first string returned).
	store func(table []byte) []byte
}

// ParseRequest checks that b is a well-formed request of major version 1 and returns a view of
// it. Sections of unknown kinds are skipped; every count and reference is checked against the
// bytes present (the string ids of queue records as they are read; see Err), so a hostile
// message yields an error, never a panic or a huge allocation.
func ParseRequest(b []byte) (*View, error) {
	v := &View{}
	return v, v.Parse(b)
}

// Parse is ParseRequest into an existing View, reusing its storage: a plugin that serves many
// calls parses each request into one View and allocates nothing for it. Whatever v viewed before
// is forgotten, also when Parse fails.
func (v *View) Parse(b []byte) error {
	*v = View{first: v.first[:0]}
	if len(b) < headerSize {
		return errorf("request of %d bytes is shorter than its %d-byte header", len(b), headerSize)
	}
	if string(b[:4]) != RequestMagic {
		return errorf("request magic %q, want %q", b[:4], RequestMagic)
	}
	if major := le.Uint16(b[4:]); major != Major {
		return errorf("request ABI major version %d, this reader speaks %d", major, Major)
	}
	if n := le.Uint32(b[8:]); uint64(n) != uint64(len(b)) {
		return errorf("request header says %d bytes, got %d", n, len(b))
	}
	nsec := uint64(le.Uint32(b[12:]))
	if nsec > uint64(len(b)-headerSize)/dirEntry {
		return errorf("request declares %d sections, more than its %d bytes can hold", nsec, len(b))
	}
	v.buf = b
	dirEnd := headerSize + int(nsec)*dirEntry
	var seen uint32 // bit k: a section of kind k is present
	// sec[k]: where section kind k is, as its offset<<32 | its length (the zeroing of an array
	// of slices costs a guest three stores a kind).
	var sec sections
	for i := 0; i < int(nsec); i++ {
		d := b[headerSize+i*dirEntry:]
		kind, off, n := le.Uint32(d), uint64(le.Uint32(d[4:])), uint64(le.Uint32(d[8:]))
		if off%4 != 0 || off < uint64(dirEnd) || off+n > uint64(len(b)) {
			return errorf("section %d (kind %d) at [%d,%d) is misaligned or outside the %d-byte request", i, kind, off, off+n, len(b))
		}
		if kind >= SectionStrings && kind <= SectionPrevOwners { // kind 0 is reserved: skipped like any unknown kind
			if seen&(1<<kind) != 0 {
				return errorf("section kind %d appears twice", kind)
			}
			seen |= 1 << kind
			sec[kind] = off<<32 | n
		}
	}
	const required = 1<<SectionStrings | 1<<SectionMeta | 1<<SectionQueues | 1<<SectionConsumers
	if seen&required != required {
		for _, k := range []uint32{SectionStrings, SectionMeta, SectionQueues, SectionConsumers} {
			if seen&(1<<k) == 0 {
				return errorf("request lacks required section kind %d", k)
			}
		}
	}
	if err := v.parseStrings(sec.at(b, SectionStrings)); err != nil {
		return err
	}
	meta := sec.at(b, SectionMeta)
	if len(meta) < 8 {
		return errorf("meta section of %d bytes, want 8", len(meta))
	}
	v.group = le.Uint32(meta)
	if err := v.checkString(v.group, "group"); err != nil {
		return err
	}
	var err error
	if v.queues, err = records(sec.at(b, SectionQueues), 12, "queues"); err != nil {
		return err
	}
	// The string ids of queue records are checked when a record is read (Queue), not here: a
	// strategy that needs only len(mqAll), as RocketMQ's AVG and AVG_BY_CIRCLE do, never pays
	// for checking 2 ids of every queue, which in a wasm guest was most of parsing.
	if v.consumers, err = v.consumerList(sec.at(b, SectionConsumers)); err != nil {
		return err
	}
	if seen&(1<<SectionTargets) != 0 {
		v.hasTarget = true
		if v.targets, err = v.stringList(sec.at(b, SectionTargets), "targets"); err != nil {
			return err
		}
	}
	if seen&(1<<SectionConfig) != 0 {
		if v.config, err = records(sec.at(b, SectionConfig), 8, "config"); err != nil {
			return err
		}
		for i := 0; i < len(v.config); i += 8 {
			if err := v.checkString(le.Uint32(v.config[i:]), "config key"); err != nil {
				return err
			}
			if err := v.checkString(le.Uint32(v.config[i+4:]), "config value"); err != nil {
				return err
			}
			if i > 0 && v.strCompare(le.Uint32(v.config[i-8:]), le.Uint32(v.config[i:])) >= 0 {
				return errorf("config keys are not strictly increasing at entry %d", i/8)
			}
		}
	}
	nq, nc := v.NumQueues(), v.NumConsumers()
	// Most requests carry no attributes: four calls fewer (in a wasm guest, a call costs tens of
	// instructions).
	const attrs = 1<<SectionQueueLabels | 1<<SectionQueueMetrics | 1<<SectionConsumerLabels | 1<<SectionConsumerMetrics
	if seen&attrs != 0 {
		if v.qlabels, err = v.attrSection(&sec, SectionQueueLabels, 12, nq, "queue labels"); err != nil {
			return err
		}
		if v.qmetrics, err = v.attrSection(&sec, SectionQueueMetrics, 16, nq, "queue metrics"); err != nil {
			return err
		}
		if v.clabels, err = v.attrSection(&sec, SectionConsumerLabels, 12, nc, "consumer labels"); err != nil {
			return err
		}
		if v.cmetrics, err = v.attrSection(&sec, SectionConsumerMetrics, 16, nc, "consumer metrics"); err != nil {
			return err
		}
		v.hasQAttr = seen&(1<<SectionQueueLabels|1<<SectionQueueMetrics) != 0
		v.hasCAttr = seen&(1<<SectionConsumerLabels|1<<SectionConsumerMetrics) != 0
	}
	if seen&(1<<SectionPrevOwners) != 0 {
		if v.prev, err = records(sec.at(b, SectionPrevOwners), 4, "previous owners"); err != nil {
			return err
		}
		if len(v.prev)/4 != nq {
			return errorf("%d previous owners for %d queues", len(v.prev)/4, nq)
		}
		for i := 0; i < len(v.prev); i += 4 {
			if id := le.Uint32(v.prev[i:]); id != NoString {
				if err := v.checkString(id, "previous owner"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// sections holds where each section kind is in a request, as its offset<<32 | its length; an
// absent kind is 0 (no section starts at offset 0, where the header is).
type sections [SectionPrevOwners + 1]uint64

// at returns section kind k of request b.
func (s *sections) at(b []byte, k uint32) []byte {
	off, n := s[k]>>32, s[k]&(1<<32-1)
	return b[off : off+n : off+n]
}

// DetachStrings moves the string table out of the request bytes, so that every string the view
// returns stays valid and unchanged when those bytes are reused. store must return a copy of
// table in storage that is never written again. The SDK reads each request into one buffer kept
// between calls and detaches its strings into append-only chunks: the string table is usually a
// small part of a request (queue records are integers), and a strategy may keep any string it
// was given.
//
// The table is copied when the view first returns a string, not before: a strategy that reads
// only counts and indices, as RocketMQ's AVG and AVG_BY_CIRCLE do, copies nothing, and its guest
// allocates nothing from call to call. So the request bytes must stay unchanged until the view
// is done with, as they must without DetachStrings.
func (v *View) DetachStrings(store func(table []byte) []byte) {
	v.store = store
}

// detach copies the string table with the store DetachStrings was given.
func (v *View) detach() {
	if len(v.blob) > 0 {
		v.blob = v.store(v.blob)
	}
	v.store = nil
}

func (v *View) parseStrings(s []byte) error {
	if len(s) < 4 {
		return errorf("strings section of %d bytes has no count", len(s))
	}
	n := uint64(le.Uint32(s))
	if 4+4*(n+1) > uint64(len(s)) {
		return errorf("strings section declares %d strings, more than its %d bytes can hold", n, len(s))
	}
	v.nstr = int(n)
	v.offs = s[4 : 4+4*(n+1)]
	v.blob = s[4+4*(n+1):]
	if le.Uint32(v.offs) != 0 {
		return errorf("string table starts at offset %d, want 0", le.Uint32(v.offs))
	}
	// desc ORs the differences of consecutive offsets, negative when one decreases; with none
	// decreasing, the last offset bounds all of them. empty ORs the differences less one,
	// negative as well when a string is empty.
	desc, empty, last := steps(v.offs[4:], 0)
	if desc >= 0 && last <= int64(len(v.blob)) {
		v.nonEmpty = empty >= 0
		return nil
	}
	prev := uint32(0) // the first offending offset, for the message
	for i := 1; i <= v.nstr; i++ {
		o := le.Uint32(v.offs[4*i:])
		if o < prev || uint64(o) > uint64(len(v.blob)) {
			return errorf("string %d ends at %d, outside [%d,%d]", i-1, o, prev, len(v.blob))
		}
		prev = o
	}
	return nil
}

// records returns the records of a counted section, checking that count records fit.
func records(s []byte, size int, what string) ([]byte, error) {
	if len(s) < 4 {
		return nil, errorf("%s section of %d bytes has no count", what, len(s))
	}
	n := uint64(le.Uint32(s))
	if n*uint64(size) > uint64(len(s)-4) {
		return nil, errorf("%s section declares %d entries, more than its %d bytes can hold", what, n, len(s))
	}
	return s[4 : 4+n*uint64(size)], nil
}

// consumerList is stringList for cidAll, noting whether its ids strictly increase
// (DistinctConsumers): when they do, the last id is the largest.
func (v *View) consumerList(s []byte) ([]byte, error) {
	r, err := records(s, 4, "consumers")
	if err != nil {
		return nil, err
	}
	_, desc, last := steps(r, -1) // desc: ORs each id minus the one before minus one
	if desc >= 0 && last < int64(v.nstr) {
		v.increasing = true
		return r, nil
	}
	return v.stringList(s, "consumers")
}

func (v *View) stringList(s []byte, what string) ([]byte, error) {
	r, err := records(s, 4, what)
	if err != nil {
		return nil, err
	}
	var maxID uint32
	for i := 0; i+4 <= len(r); i += 4 {
		maxID = max(maxID, le.Uint32(r[i:i+4:i+4]))
	}
	if len(r) > 0 && uint64(maxID) >= uint64(v.nstr) {
		for i := 0; i < len(r); i += 4 {
			if err := v.checkString(le.Uint32(r[i:]), what); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// attrSection checks a labels (size 12) or metrics (size 16) section: owner indices in range,
// entries sorted by (owner, key) with no key twice for one owner.
func (v *View) attrSection(sec *sections, kind uint32, size, owners int, what string) ([]byte, error) {
	if sec[kind] == 0 {
		return nil, nil
	}
	s := sec.at(v.buf, kind)
	r, err := records(s, size, what)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(r); i += size {
		owner, key := le.Uint32(r[i:]), le.Uint32(r[i+4:])
		if uint64(owner) >= uint64(owners) {
			return nil, errorf("%s entry %d names index %d of %d", what, i/size, owner, owners)
		}
		// The ids are checked inline: building the message "<what> key" for every record, as
		// a checkString call did, cost two allocations a record (RATIONALE.md).
		if uint64(key) >= uint64(v.nstr) {
			return nil, v.checkString(key, what+" key")
		}
		if size == 12 {
			if value := le.Uint32(r[i+8:]); uint64(value) >= uint64(v.nstr) {
				return nil, v.checkString(value, what+" value")
			}
		}
		if i > 0 {
			po := le.Uint32(r[i-size:])
			if po > owner || po == owner && v.strCompare(le.Uint32(r[i-size+4:]), key) >= 0 {
				return nil, errorf("%s are not sorted by index and key at entry %d", what, i/size)
			}
		}
	}
	return r, nil
}

func (v *View) checkString(id uint32, what string) error {
	if uint64(id) >= uint64(v.nstr) {
		return errorf("%s refers to string %d of %d", what, id, v.nstr)
	}
	return nil
}

// strBytes is string id's bytes. It is small enough for the compiler to inline, which spares a
// Go wasm guest a call for every string it reads.
func (v *View) strBytes(id uint32) []byte {
	se := le.Uint64(v.offs[4*id:]) // its start and its end, the next string's start
	return v.blob[uint32(se) : se>>32]
}

func (v *View) str(id uint32) string {
	if v.store != nil {
		v.detach()
	}
	return bytesString(v.strBytes(id))
}

// bytesString is b as a string sharing its memory: the string table's bytes never change once
// the View holds them (DetachStrings copies them first where they would).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (v *View) strCompare(a, b uint32) int { return bytes.Compare(v.strBytes(a), v.strBytes(b)) }

// Minor is the request's minor ABI version.
func (v *View) Minor() uint16 { return le.Uint16(v.buf[6:]) }

// Group is the consumer group's name.
func (v *View) Group() string { return v.str(v.group) }

// NumQueues is len(mqAll).
func (v *View) NumQueues() int { return len(v.queues) / 12 }

// Queue returns mqAll[i]. A record that names a string the request does not have reads as empty
// topic and broker names, and makes Err report the request as malformed.
func (v *View) Queue(i int) Queue {
	r := v.queues[12*i : 12*i+12]
	t, b, id := le.Uint32(r), le.Uint32(r[4:]), int32(le.Uint32(r[8:]))
	if uint64(t) >= uint64(v.nstr) || uint64(b) >= uint64(v.nstr) {
		if v.err == nil {
			v.err = errorf("queue %d names topic string %d and broker string %d of a %d-string table", i, t, b, v.nstr)
		}
		return Queue{QueueID: id}
	}
	return Queue{Topic: v.str(t), BrokerName: v.str(b), QueueID: id}
}

// QueueRun reads the run of mqAll that starts at queue i: the queues from i on whose records
// name the same topic and broker strings (string ids: the writer stores each distinct string
// once). It returns their topic and broker, the index after the run, and ids with the run's queue
// ids appended, for a strategy that works a (topic, broker) at a time, as CONSISTENT_HASH's keys
// share their prefix. A record that names a string the request lacks is a run of its own with
// empty names, and makes Err report the request as malformed (as Queue). ids is grown to hold
// every queue from i on, so that a caller that passes the same slice again allocates once.
func (v *View) QueueRun(i int, ids []int32) (topic, broker string, end int, _ []int32) {
	r := v.queues[12*i : 12*i+12 : 12*i+12]
	names := le.Uint64(r)
	if t, b := uint32(names), uint32(names>>32); uint64(t) < uint64(v.nstr) && uint64(b) < uint64(v.nstr) {
		topic, broker = v.str(t), v.str(b)
	} else {
		v.Queue(i) // records the error
		return "", "", i + 1, append(ids, int32(le.Uint32(r[8:])))
	}
	q := v.queues[12*i:]
	n := len(ids)
	ids = slices.Grow(ids, len(q)/12)
	k := runIDs(q, names, ids[n:n+len(q)/12])
	return topic, broker, i + k, ids[:n+k]
}

// Err reports a malformed queue record that Queue met, or nil. ParseRequest checks everything
// else up front, but the string ids of queue records only as they are read, so that a reader
// that never looks at queue names does not pay for checking them: one that does must check Err
// before it trusts what it read (the Go SDK fails the call; DecodeRequest returns the error).
func (v *View) Err() error { return v.err }

// NumConsumers is len(cidAll).
func (v *View) NumConsumers() int { return len(v.consumers) / 4 }

// Consumer returns cidAll[i].
func (v *View) Consumer(i int) string { return v.str(le.Uint32(v.consumers[4*i:])) }

// Consumers appends every id of cidAll, in order, to dst and returns the extended slice: Consumer
// for each index in one call. A strategy that reads every id calls it once rather than Consumer
// once an id, each call of which costs a Go wasm guest several hundred instructions
// (BENCHMARKS.md). The strings live as long as Consumer's.
func (v *View) Consumers(dst []string) []string {
	if v.store != nil {
		v.detach()
	}
	dst = slices.Grow(dst, len(v.consumers)/4)
	for c := v.consumers; len(c) >= 4; c = c[4:] {
		dst = append(dst, bytesString(v.strBytes(le.Uint32(c))))
	}
	return dst
}

// SameConsumers reports whether cidAll is ids: the same strings, in the same order. It makes no
// string of the request's, so a strategy that keeps the last request's ids (a memo) learns that
// they still hold in one call, without reading them again with Consumers and comparing. In a wasm
// guest the comparison is written in WebAssembly, eight bytes a step (BENCHMARKS.md).
func (v *View) SameConsumers(ids []string) bool {
	return sameIDs(v.consumers, v.offs, v.blob, ids)
}

// WholeGroup reports whether the request asks for every consumer of cidAll (no targets section).
func (v *View) WholeGroup() bool { return !v.hasTarget }

// NumTargets is the number of results the response must carry.
func (v *View) NumTargets() int {
	if !v.hasTarget {
		return v.NumConsumers()
	}
	return len(v.targets) / 4
}

// Target returns the consumer id of result i.
func (v *View) Target(i int) string { return v.str(v.targetID(i)) }

// TargetIndex returns the index of the first occurrence of target i's id in cidAll, or -1 when
// the target is not a member (RocketMQ's indexOf). It relies on the encoder's rule that each
// distinct string is stored once, so ids compare as integers.
func (v *View) TargetIndex(i int) int { return v.firstIndex(v.targetID(i)) }

// TargetAt is Target and TargetIndex in one call, for a loop over every target.
func (v *View) TargetAt(i int) (cid string, index int) {
	id := v.targetID(i)
	return v.str(id), v.firstIndex(id)
}

func (v *View) targetID(i int) uint32 {
	if v.hasTarget {
		return le.Uint32(v.targets[4*i:])
	}
	return le.Uint32(v.consumers[4*i:])
}

// firstIndex returns the index of string id's first occurrence in cidAll, or -1.
func (v *View) firstIndex(id uint32) int {
	if !v.hasFirst {
		v.indexConsumers()
	}
	return int(v.first[id])
}

func (v *View) indexConsumers() {
	v.first = slices.Grow(v.first[:0], v.nstr)[:v.nstr]
	for j := range v.first {
		v.first[j] = -1
	}
	for j := v.NumConsumers() - 1; j >= 0; j-- {
		v.first[le.Uint32(v.consumers[4*j:])] = int32(j)
	}
	v.hasFirst = true
}

// Config returns the binding's setting for key.
func (v *View) Config(key string) (string, bool) {
	lo, hi := 0, len(v.config)/8
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := bytesCompareString(v.strBytes(le.Uint32(v.config[8*m:])), key); {
		case c == 0:
			return v.str(le.Uint32(v.config[8*m+4:])), true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return "", false
}

func bytesCompareString(b []byte, s string) int {
	if len(b) == 0 {
		if s == "" {
			return 0
		}
		return -1
	}
	return bytes.Compare(b, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// HasQueueAttrs reports whether the request carries per-queue attributes at all.
func (v *View) HasQueueAttrs() bool { return v.hasQAttr }

// HasConsumerAttrs reports whether the request carries per-consumer attributes at all.
func (v *View) HasConsumerAttrs() bool { return v.hasCAttr }

// QueueLabel returns label key of queue i.
func (v *View) QueueLabel(i int, key string) (string, bool) {
	r, ok := v.find(v.qlabels, 12, i, key)
	if !ok {
		return "", false
	}
	return v.str(le.Uint32(r[8:])), true
}

// QueueMetric returns metric key of queue i.
func (v *View) QueueMetric(i int, key string) (int64, bool) {
	r, ok := v.find(v.qmetrics, 16, i, key)
	if !ok {
		return 0, false
	}
	return int64(le.Uint64(r[8:])), true
}

// ConsumerLabel returns label key of consumer i.
func (v *View) ConsumerLabel(i int, key string) (string, bool) {
	r, ok := v.find(v.clabels, 12, i, key)
	if !ok {
		return "", false
	}
	return v.str(le.Uint32(r[8:])), true
}

// ConsumerMetric returns metric key of consumer i.
func (v *View) ConsumerMetric(i int, key string) (int64, bool) {
	r, ok := v.find(v.cmetrics, 16, i, key)
	if !ok {
		return 0, false
	}
	return int64(le.Uint64(r[8:])), true
}

// find locates the record of (owner, key) in a sorted attribute section.
func (v *View) find(sec []byte, size, owner int, key string) ([]byte, bool) {
	lo, hi := 0, len(sec)/size
	for lo < hi { // first record with index >= owner
		m := int(uint(lo+hi) >> 1)
		if int(le.Uint32(sec[m*size:])) < owner {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for ; lo < len(sec)/size && int(le.Uint32(sec[lo*size:])) == owner; lo++ {
		r := sec[lo*size:]
		if bytesCompareString(v.strBytes(le.Uint32(r[4:])), key) == 0 {
			return r, true
		}
	}
	return nil, false
}

// PrevOwner returns the consumer id that owned queue i in the previous generation.
func (v *View) PrevOwner(i int) (string, bool) {
	if v.prev == nil {
		return "", false
	}
	id := le.Uint32(v.prev[4*i:])
	if id == NoString {
		return "", false
	}
	return v.str(id), true
}

// Request decodes the whole view into a Request whose strings alias the view's bytes.
func (v *View) Request() *Request {
	r := &Request{Group: v.Group()}
	r.Queues = make([]Queue, v.NumQueues())
	for i := range r.Queues {
		r.Queues[i] = v.Queue(i)
	}
	r.Consumers = make([]string, v.NumConsumers())
	for i := range r.Consumers {
		r.Consumers[i] = v.Consumer(i)
	}
	if v.hasTarget {
		r.Targets = make([]string, len(v.targets)/4)
		for i := range r.Targets {
			r.Targets[i] = v.Target(i)
		}
	}
	if v.config != nil {
		r.Config = make(map[string]string, len(v.config)/8)
		for i := 0; i < len(v.config); i += 8 {
			r.Config[v.str(le.Uint32(v.config[i:]))] = v.str(le.Uint32(v.config[i+4:]))
		}
	}
	if v.hasQAttr {
		r.QueueAttrs = v.attrs(v.qlabels, v.qmetrics, len(r.Queues))
	}
	if v.hasCAttr {
		r.ConsumerAttrs = v.attrs(v.clabels, v.cmetrics, len(r.Consumers))
	}
	if v.prev != nil {
		r.PrevOwners = make([]string, len(r.Queues))
		for i := range r.PrevOwners {
			r.PrevOwners[i], _ = v.PrevOwner(i)
		}
	}
	return r
}

func (v *View) attrs(labels, metrics []byte, n int) []Attrs {
	out := make([]Attrs, n)
	for i := 0; i < len(labels); i += 12 {
		a := &out[le.Uint32(labels[i:])]
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		a.Labels[v.str(le.Uint32(labels[i+4:]))] = v.str(le.Uint32(labels[i+8:]))
	}
	for i := 0; i < len(metrics); i += 16 {
		a := &out[le.Uint32(metrics[i:])]
		if a.Metrics == nil {
			a.Metrics = map[string]int64{}
		}
		a.Metrics[v.str(le.Uint32(metrics[i+4:]))] = int64(le.Uint64(metrics[i+8:]))
	}
	return out
}

// DecodeRequest parses and fully decodes a request. It copies b first, so the result does not
// depend on b afterwards.
func DecodeRequest(b []byte) (*Request, error) {
	v, err := ParseRequest(bytes.Clone(b))
	if err != nil {
		return nil, err
	}
	r := v.Request()
	if err := v.Err(); err != nil {
		return nil, err
	}
	return r, nil
}
