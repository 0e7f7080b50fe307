package store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// A generation's record is JSON. Its assignments are packed: the queues they name are listed
// once, as runs of queue ids per (topic, broker), and each member's list is a string of
// varint-coded steps through that table. A 100,000-queue generation is about a tenth of the
// size it has with every queue spelled out ({"topic":..,"brokerName":..,"queueId":..} per
// queue and member), and encodes and decodes in a fraction of the time. Records written before
// (with "assignment" and "target" as maps of queue lists) are read as they are.

// packedFormat names the packed form in a record; a record with another value is refused.
const packedFormat = "allocd-packed-1"

// generationRecord is the stored form of a Generation.
type generationRecord struct {
	Group         string            `json:"group"`
	Topic         string            `json:"topic"`
	Number        int64             `json:"number"`
	CIDs          map[string]string `json:"cids,omitempty"`
	Inputs        string            `json:"inputs"`
	Plugin        string            `json:"plugin,omitempty"`
	PluginVersion string            `json:"pluginVersion,omitempty"`
	At            time.Time         `json:"at"`
	Handoffs      []model.Handoff   `json:"handoffs,omitempty"`

	// The unpacked form, of records written before the packed one.
	Assignment map[string][]abi.Queue `json:"assignment,omitempty"`
	Target     map[string][]abi.Queue `json:"target,omitempty"`

	Packed *packedAssignments `json:"packed,omitempty"`
}

// packedAssignments are a generation's Assignment and Target over one queue table.
type packedAssignments struct {
	Format string `json:"format"`
	// Queues is the table: its runs, in order, list every queue the assignments name.
	Queues []queueRun `json:"queues"`
	// Assignment and Target map a member key to its queues: base64 of, for each queue, the
	// zigzag varint of its table index minus the previous one's (the first: minus -1).
	Assignment map[string]string `json:"assignment"`
	Target     map[string]string `json:"target,omitempty"`
	// Handoffs are the generation's handoffs grouped by previous owner, new owner, start and
	// deadline, the queues of each group coded as a member's list is.
	Handoffs []handoffRun `json:"handoffs,omitempty"`
}

// handoffRun is the handoffs that share their members and times.
type handoffRun struct {
	From     string    `json:"from"`
	To       string    `json:"to"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
	Queues   string    `json:"queues"`
}

// queueRun is a run of consecutive queue ids of one broker of one topic.
type queueRun struct {
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
	First  int32  `json:"first"`
	Count  int32  `json:"count"`
}

// MarshalJSON writes the generation's record with its assignments packed.
func (g Generation) MarshalJSON() ([]byte, error) { return g.appendJSON(nil) }

// appendJSON appends the generation's record, as MarshalJSON writes it, to b.
func (g *Generation) appendJSON(b []byte) ([]byte, error) {
	if g.Assignment == nil && len(g.Target) == 0 && g.Handoffs.Len() == 0 {
		r, err := json.Marshal(generationRecord{
			Group: g.Group, Topic: g.Topic, Number: g.Number, CIDs: g.CIDs, Inputs: g.Inputs,
			Plugin: g.Plugin, PluginVersion: g.PluginVersion, At: g.At,
		})
		return append(b, r...), err
	}
	return appendPackedRecord(b, g)
}

// recordBuffers keeps the buffers of a commit's generation records for the next commit's: a
// 100,000-queue generation's record is 0.75 MB, allocated afresh for every rebalance otherwise
// (RATIONALE.md, "Why a rebalance's buffers are kept for the next"). A record's bytes are the
// store's to read until its transaction ends, and nobody's after. The nil list keeps none.
type recordBuffers struct {
	mu   sync.Mutex
	free [][]byte
}

// maxRecordBuffers bounds the buffers kept: a batch of as many generations reuses them all.
const maxRecordBuffers = 4

// take is an empty buffer, nil when none is kept.
func (l *recordBuffers) take() []byte {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		return nil
	}
	b := l.free[n-1]
	l.free = l.free[:n-1]
	return b[:0]
}

// give keeps some of bs for later records: none of them may be read afterwards.
func (l *recordBuffers) give(bs [][]byte) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bs {
		if len(l.free) < maxRecordBuffers && cap(b) > 0 {
			l.free = append(l.free, b)
		}
	}
}

// UnmarshalJSON reads a record in the packed form or the one before it.
func (g *Generation) UnmarshalJSON(b []byte) error {
	var r generationRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*g = Generation{
		Group: r.Group, Topic: r.Topic, Number: r.Number, CIDs: r.CIDs, Inputs: r.Inputs,
		Plugin: r.Plugin, PluginVersion: r.PluginVersion, At: r.At, Handoffs: HandoffsOf(r.Handoffs),
		Assignment: r.Assignment, Target: r.Target,
	}
	if r.Packed == nil {
		return nil
	}
	if r.Assignment != nil || r.Target != nil || r.Handoffs != nil {
		return fmt.Errorf("generation %q/%q: both a packed and an unpacked assignment", r.Group, r.Topic)
	}
	var err error
	var hs []model.Handoff
	g.Assignment, g.Target, hs, err = r.Packed.unpack()
	g.Handoffs = HandoffsOf(hs)
	if err != nil {
		return fmt.Errorf("generation %q/%q: %w", r.Group, r.Topic, err)
	}
	return nil
}

// maxPackedQueues bounds the table a record may declare: a damaged record must not make the
// daemon allocate without end (a (group, topic) has at most MaxBrokers x MaxQueues queues,
// far below it).
const maxPackedQueues = 1 << 24

// unpack decodes the packed lists, each queue one of the table's, whose strings they share.
func (p *packedAssignments) unpack() (assignment, target map[string][]abi.Queue, handoffs []model.Handoff, err error) {
	if p.Format != packedFormat {
		return nil, nil, nil, fmt.Errorf("packed assignment of format %q: this version reads %q", p.Format, packedFormat)
	}
	n := 0
	for _, r := range p.Queues {
		if r.Count <= 0 || int64(r.First)+int64(r.Count) > 1<<31 {
			return nil, nil, nil, fmt.Errorf("packed queue run %s/%s from %d of %d queues is invalid", r.Topic, r.Broker, r.First, r.Count)
		}
		n += int(r.Count)
		if n > maxPackedQueues {
			return nil, nil, nil, fmt.Errorf("packed queue table lists more than %d queues", maxPackedQueues)
		}
	}
	table := make([]abi.Queue, 0, n)
	for _, r := range p.Queues {
		for id := int64(r.First); id < int64(r.First)+int64(r.Count); id++ {
			table = append(table, abi.Queue{Topic: r.Topic, BrokerName: r.Broker, QueueID: int32(id)})
		}
	}
	list := func(what, s string) ([]abi.Queue, error) {
		raw, err := base64.RawStdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("queues of %s: %w", what, err)
		}
		qs := make([]abi.Queue, 0, len(raw)) // a queue takes at least one byte
		prev := int64(-1)
		for len(raw) > 0 {
			d, k := binary.Varint(raw)
			if k <= 0 {
				return nil, fmt.Errorf("queues of %s: a truncated or overlong varint", what)
			}
			raw = raw[k:]
			i := prev + d
			if i < 0 || i >= int64(len(table)) {
				return nil, fmt.Errorf("queues of %s: queue index %d outside the table of %d", what, i, len(table))
			}
			qs = append(qs, table[i])
			prev = i
		}
		return qs, nil
	}
	decode := func(m map[string]string) (map[string][]abi.Queue, error) {
		out := make(map[string][]abi.Queue, len(m))
		for key, s := range m {
			qs, err := list(fmt.Sprintf("member %q", key), s)
			if err != nil {
				return nil, err
			}
			out[key] = qs
		}
		return out, nil
	}
	if p.Assignment != nil {
		if assignment, err = decode(p.Assignment); err != nil {
			return nil, nil, nil, err
		}
	}
	if p.Target != nil {
		if target, err = decode(p.Target); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, r := range p.Handoffs {
		qs, err := list(fmt.Sprintf("the handoff from %q to %q", r.From, r.To), r.Queues)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, q := range qs {
			handoffs = append(handoffs, model.Handoff{Queue: q, From: r.From, To: r.To, Since: r.Since, Deadline: r.Deadline})
		}
	}
	return assignment, target, handoffs, nil // in run order: HandoffsOf sorts them by queue
}
