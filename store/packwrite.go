package store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/allocd/allocd/abi"
)

// appendPackedRecord appends g's record in the packed form: the bytes json.Marshal writes for a
// generationRecord with Packed set (TestPackedRecordIsJSON compares them), written in one pass
// into one buffer, each list's base64 straight from its varints, with no intermediate
// packedAssignments, maps of coded strings or re-scan of the output. The queue table is g's
// packing table (PackOver) when it has all of g's queues, else one of exactly g's queues.
func appendPackedRecord(b []byte, g *Generation) ([]byte, error) {
	runs := handoffRuns(&g.Handoffs)
	if g.packTable != nil {
		out, ok, err := appendPackedOver(b, g, runs, g.packTable)
		if err != nil || ok {
			return out, err
		}
	}
	t := newTableBuilder()
	for _, m := range []map[string][]abi.Queue{g.Assignment, g.Target} {
		for _, qs := range m {
			t.add(qs)
		}
	}
	for _, q := range g.Handoffs.Queues() {
		t.addOne(q)
	}
	t.build()
	out, _, err := appendPackedOver(b, g, runs, t)
	return out, err
}

// PackOver has g's record packed over t, a table of the queues g's lists name (a topic's whole
// list, say) when it has them all, instead of a table of g's queues built for the record: the
// record then lists t's queues, some perhaps named by no list. t must not be used by another
// goroutine while g is written; a table that lacks one of g's queues is ignored.
func (g *Generation) PackOver(t *QueueTable) { g.packTable = t }

// KeysInOrder offers keys, which should be the keys of g's Assignment in order (a job's sorted
// member keys), to its record: they are checked (in order, each an Assignment's key, as many)
// rather than sorted again, and sorted ones are made when they are not those.
func (g *Generation) KeysInOrder(keys []string) { g.keys = keys }

// offeredKeys are the keys offered by KeysInOrder when they are strictly in order, else nil.
// Whether they are a map's keys is checked as the record reads the map (appendInKeyOrder).
func (g *Generation) offeredKeys() []string {
	for i := 1; i < len(g.keys); i++ {
		if g.keys[i-1] >= g.keys[i] {
			return nil
		}
	}
	return g.keys
}

// appendInKeyOrder appends what each writes for every entry of m, by key: in like's order
// when like is m's keys (as many, each found in m as it is read: like is strictly in order, so
// it is then m's keys sorted), else in the order of m's keys sorted afresh, the bytes written
// for like dropped. Checking membership in the lookups the record makes anyway spared three
// passes of 10,000 lookups over a large group's maps (RATIONALE.md).
func appendInKeyOrder[V any](b []byte, m map[string]V, like []string, each func(b []byte, i int, k string, v V) []byte) []byte {
	if len(like) == len(m) {
		mark := len(b)
		for i, k := range like {
			v, ok := m[k]
			if !ok {
				return appendInKeyOrder(b[:mark], m, nil, each)
			}
			b = each(b, i, k, v)
		}
		return b
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		b = each(b, i, k, m[k])
	}
	return b
}

// handoffRuns groups handoffs that share their members and times, in order of first
// appearance, each run holding the indices of its handoffs. The runs' indices are stretches of
// one array, laid out by counting: 50,000 handoffs in 10,000 runs cost two arrays of indices,
// not a growing slice per run.
func handoffRuns(hs *Handoffs) []run {
	if hs.Len() == 0 {
		return nil
	}
	// Handoffs in queue order come in stretches of one run (a member's block of queues held
	// back for one other): the previous handoff's run is tried before the map, which is sized
	// by the stretches.
	stretches := 1
	for n := 1; n < hs.Len(); n++ {
		if !hs.same(n-1, n) {
			stretches++
		}
	}
	runs := make([]run, 0, stretches)
	at := make(map[[3]int32]int, stretches)
	of := make([]int32, hs.Len()) // handoff -> its run
	counts := make([]int, 0, stretches)
	i := -1
	for n := range hs.Len() {
		if i < 0 || !hs.same(runs[i].first, n) {
			k := hs.runKey(n)
			var ok bool
			if i, ok = at[k]; !ok {
				i = len(runs)
				at[k] = i
				runs = append(runs, run{handoffKey: handoffKey{hs.From(n), hs.To(n), hs.Since(n), hs.Deadline(n)}, first: n})
				counts = append(counts, 0)
			}
		}
		of[n] = int32(i)
		counts[i]++
	}
	all := make([]int32, hs.Len())
	start := 0
	for i, n := range counts {
		runs[i].hs = all[start : start : start+n]
		start += n
	}
	for n, i := range of {
		runs[i].hs = append(runs[i].hs, int32(n))
	}
	return runs
}

// appendPackedOver appends g's record over the queue table t; ok is false (and the bytes
// appended are to be dropped) when t lacks one of g's queues.
func appendPackedOver(b []byte, g *Generation, runs []run, t *QueueTable) (_ []byte, ok bool, err error) {
	// The members' keys in order, offered for the maps that have the same keys (CIDs and
	// Assignment usually do, Target often).
	keys := g.offeredKeys()
	b = slices.Grow(b, packedSizeHint(g, len(runs)))
	b = append(b, `{"group":`...)
	b = appendJSONString(b, g.Group)
	b = append(b, `,"topic":`...)
	b = appendJSONString(b, g.Topic)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, g.Number, 10)
	if len(g.CIDs) > 0 {
		b = append(b, `,"cids":{`...)
		b = appendInKeyOrder(b, g.CIDs, keys, func(b []byte, i int, k, cid string) []byte {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			return appendJSONString(b, cid)
		})
		b = append(b, '}')
	}
	b = append(b, `,"inputs":`...)
	b = appendJSONString(b, g.Inputs)
	if g.Plugin != "" {
		b = append(b, `,"plugin":`...)
		b = appendJSONString(b, g.Plugin)
	}
	if g.PluginVersion != "" {
		b = append(b, `,"pluginVersion":`...)
		b = appendJSONString(b, g.PluginVersion)
	}
	b = append(b, `,"at":`...)
	if b, err = appendJSONTime(b, g.At); err != nil {
		return nil, false, err
	}
	b = append(b, `,"packed":{"format":"`+packedFormat+`","queues":`...)
	rs := t.runs()
	if rs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, r := range rs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"topic":`...)
			b = appendJSONString(b, r.Topic)
			b = append(b, `,"broker":`...)
			b = appendJSONString(b, r.Broker)
			b = append(b, `,"first":`...)
			b = strconv.AppendInt(b, int64(r.First), 10)
			b = append(b, `,"count":`...)
			b = strconv.AppendInt(b, int64(r.Count), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	var scratch []byte
	missing := false // a queue not in t
	prev := -1
	stepSlot := func(i int) {
		missing = missing || i < 0
		scratch = binary.AppendVarint(scratch, int64(i-prev))
		prev = i
	}
	step := func(q abi.Queue) { stepSlot(t.Index(q)) }
	encode := func(b []byte) []byte {
		b = append(b, '"')
		b = base64.RawStdEncoding.AppendEncode(b, scratch)
		scratch, prev = scratch[:0], -1
		return append(b, '"')
	}
	list := func(b []byte, qs []abi.Queue) []byte {
		if first, ok := t.Span(qs); ok {
			// A stretch of the table's slots: the first step, then steps of one.
			scratch = binary.AppendVarint(scratch, int64(first-prev))
			for range len(qs) - 1 {
				scratch = append(scratch, 2) // the varint of 1
			}
			prev = first + len(qs) - 1
			return encode(b)
		}
		for _, q := range qs {
			step(q)
		}
		return encode(b)
	}
	code := func(b []byte, m map[string][]abi.Queue) []byte {
		b = append(b, '{')
		b = appendInKeyOrder(b, m, keys, func(b []byte, i int, k string, qs []abi.Queue) []byte {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			return list(b, qs)
		})
		return append(b, '}')
	}
	b = append(b, `,"assignment":`...)
	if g.Assignment == nil {
		b = append(b, "null"...)
	} else {
		b = code(b, g.Assignment)
	}
	if len(g.Target) > 0 {
		b = append(b, `,"target":`...)
		b = code(b, g.Target)
	}
	if len(runs) > 0 {
		var times timeCache // the runs' times are mostly a few
		b = append(b, `,"handoffs":[`...)
		for i, r := range runs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"from":`...)
			b = appendJSONString(b, r.from)
			b = append(b, `,"to":`...)
			b = appendJSONString(b, r.to)
			b = append(b, `,"since":`...)
			if b, err = times.append(b, r.since); err != nil {
				return nil, false, err
			}
			b = append(b, `,"deadline":`...)
			if b, err = times.append(b, r.deadline); err != nil {
				return nil, false, err
			}
			b = append(b, `,"queues":`...)
			for _, n := range r.hs {
				stepSlot(g.Handoffs.SlotIn(t, int(n)))
			}
			b = encode(b)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, "}}"...), !missing, nil
}

// packedSizeHint is about the size of g's packed record, a little more for lists of queues
// far apart, so that a record of 100,000 queues is written into one buffer instead of growing
// one through a dozen copies: each member's key and client id and some punctuation, about 2
// bytes of base64 per queue of its lists (a step of one slot is a byte of varint), and each
// handoff run's members and times.
func packedSizeHint(g *Generation, runs int) int {
	n := 512 + len(g.Group) + len(g.Topic) + len(g.Inputs) + len(g.Plugin) + len(g.PluginVersion)
	for k, cid := range g.CIDs {
		n += len(k) + len(cid) + 6
	}
	for _, m := range []map[string][]abi.Queue{g.Assignment, g.Target} {
		for k, qs := range m {
			n += len(k) + 8 + 2*len(qs)
		}
	}
	return n + runs*160 + 4*g.Handoffs.Len()
}

// handoffKey is what the handoffs of one run share.
type handoffKey struct {
	from, to        string
	since, deadline time.Time
}

type run struct {
	handoffKey
	first int     // the index of the run's first handoff
	hs    []int32 // the handoffs' indices
}

// appendJSONString appends s as encoding/json writes it: plain ASCII as it is, anything else
// (quotes, controls, HTML's <, > and &, non-ASCII) through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// timeCache appends times as appendJSONTime does, remembering the last two it wrote: 10,000
// handoff runs of one rebalance share their since and deadline.
type timeCache struct {
	t   [2]time.Time
	enc [2][]byte
	n   int // how many were written
}

func (c *timeCache) append(b []byte, t time.Time) ([]byte, error) {
	for i := range min(c.n, 2) {
		if c.t[i] == t { // == as the runs compare them: the same wall clock, monotonic reading and location
			return append(b, c.enc[i]...), nil
		}
	}
	start := len(b)
	b, err := appendJSONTime(b, t)
	if err != nil {
		return nil, err
	}
	i := c.n % 2
	c.t[i], c.enc[i] = t, append(c.enc[i][:0], b[start:]...)
	c.n++
	return b, nil
}

// appendJSONTime appends t as encoding/json writes a time.Time (RFC 3339 with nanoseconds,
// refused outside the years 0-9999).
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}
