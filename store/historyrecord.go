package store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// A history record is the entry's JSON (model.HistoryEntry, as the API shows it) with its moves
// and pending handoffs packed: the brokers and client ids they name are listed once, and each
// move is four varints (broker, queue id, previous and new owner) in one base64 string. A
// 10,000-member generation that moves 50,000 queues is a few hundred kilobytes instead of
// megabytes of {"queue":{...},"from":..,"to":..}. Records written before (with "moves" and
// "pending" spelled out) are read as they are; a version before this one reads a packed
// record as an entry without moves.

// packedMovesFormat names the packed form of a history record's moves.
const packedMovesFormat = "allocd-moves-1"

// historyRecord is the stored form of a model.HistoryEntry. Its Moves and Pending shadow the
// entry's: they hold the moves of a record written unpacked.
type historyRecord struct {
	model.HistoryEntry
	Moves   []model.Move    `json:"moves,omitempty"`
	Pending []model.Handoff `json:"pending,omitempty"`
	Packed  *packedMoves    `json:"packedMoves,omitempty"`
}

type packedMoves struct {
	Format  string      `json:"format"`
	Brokers []brokerRef `json:"brokers"`
	Clients []string    `json:"clients"`
	// Moves is base64 of, per move: the zigzag varint of its broker's index minus the previous
	// move's (the first: minus 0), the uvarint of its queue id (minus the previous id plus one
	// when the broker is the same), and the uvarints of its previous and new owner's index in
	// Clients.
	Moves string `json:"moves"`
	// Pending is coded as Moves, each handoff followed by the uvarint of its index in Times.
	Times   []handoffTimes `json:"times,omitempty"`
	Pending string         `json:"pending,omitempty"`
	// Released holds the queues of each of the trigger's releases (whose own lists are left
	// empty), each coded as the queues of Moves are.
	Released []string `json:"released,omitempty"`
}

type brokerRef struct {
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
}

type handoffTimes struct {
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// MarshalHistoryEntry writes e's history record.
func MarshalHistoryEntry(e model.HistoryEntry) ([]byte, error) {
	p, ok := packMoves(e.Moves, e.Pending, e.Trigger.Released)
	if !ok {
		return json.Marshal(e) // moves out of order: spelled out, as they were
	}
	r := historyRecord{HistoryEntry: e, Packed: p}
	r.HistoryEntry.Moves, r.HistoryEntry.Pending = nil, nil
	if len(e.Trigger.Released) > 0 {
		r.Trigger.Released = make([]model.Release, len(e.Trigger.Released))
		for i, rel := range e.Trigger.Released {
			r.Trigger.Released[i] = model.Release{Member: rel.Member, Reason: rel.Reason}
		}
	}
	return json.Marshal(r)
}

// UnmarshalHistoryEntry reads a history record in the packed form or the one before it.
func UnmarshalHistoryEntry(b []byte, e *model.HistoryEntry) error {
	var r historyRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*e = r.HistoryEntry
	e.Moves, e.Pending = r.Moves, r.Pending
	if r.Packed == nil {
		return nil
	}
	if r.Moves != nil || r.Pending != nil {
		return errors.New("history record has both packed and unpacked moves")
	}
	var err error
	if e.Moves, e.Pending, err = r.Packed.unpack(); err != nil {
		return fmt.Errorf("history record of generation %d: %w", e.Generation, err)
	}
	if len(r.Packed.Released) != len(e.Trigger.Released) {
		return fmt.Errorf("history record of generation %d: %d packed releases for %d", e.Generation, len(r.Packed.Released), len(e.Trigger.Released))
	}
	for i, code := range r.Packed.Released {
		rel := &e.Trigger.Released[i]
		if rel.Queues != nil {
			return fmt.Errorf("history record of generation %d: release %d has packed and unpacked queues", e.Generation, i)
		}
		if rel.Queues, err = r.Packed.queues(code, fmt.Sprintf("queues released by %q", rel.Member)); err != nil {
			return fmt.Errorf("history record of generation %d: %w", e.Generation, err)
		}
	}
	return nil
}

// movesWriter codes queues over a broker table and owners over a client table.
type movesWriter struct {
	p       *packedMoves
	brokers map[brokerRef]int
	clients map[string]int
	buf     []byte
	last    int   // the previous entry's broker, -1 before the first
	lastID  int32 // and its queue id
}

// queue codes q; it fails when q is not after the previous entry of its broker.
func (w *movesWriter) queue(q abi.Queue) bool {
	b := w.last
	if b < 0 || w.p.Brokers[b].Broker != q.BrokerName || w.p.Brokers[b].Topic != q.Topic {
		ref := brokerRef{q.Topic, q.BrokerName}
		var ok bool
		if b, ok = w.brokers[ref]; !ok {
			b = len(w.p.Brokers)
			w.brokers[ref] = b
			w.p.Brokers = append(w.p.Brokers, ref)
		}
	}
	if q.QueueID < 0 {
		return false
	}
	w.buf = binary.AppendVarint(w.buf, int64(b-max(w.last, 0)))
	if b == w.last {
		if q.QueueID <= w.lastID {
			return false
		}
		w.buf = binary.AppendUvarint(w.buf, uint64(q.QueueID-w.lastID-1))
	} else {
		w.buf = binary.AppendUvarint(w.buf, uint64(q.QueueID))
	}
	w.last, w.lastID = b, q.QueueID
	return true
}

func (w *movesWriter) client(cid string) {
	i, ok := w.clients[cid]
	if !ok {
		i = len(w.p.Clients)
		w.clients[cid] = i
		w.p.Clients = append(w.p.Clients, cid)
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(i))
}

// packMoves codes moves and pending; it fails when an entry is not after the previous one of
// its broker (moves come in queue order).
func packMoves(moves []model.Move, pending []model.Handoff, released []model.Release) (*packedMoves, bool) {
	p := &packedMoves{Format: packedMovesFormat, Brokers: []brokerRef{}, Clients: []string{}}
	w := &movesWriter{p: p, brokers: map[brokerRef]int{}, clients: map[string]int{}, last: -1}
	for _, m := range moves {
		if !w.queue(m.Queue) {
			return nil, false
		}
		w.client(m.From)
		w.client(m.To)
	}
	p.Moves = base64.RawStdEncoding.EncodeToString(w.buf)
	for _, r := range released {
		w.buf, w.last = w.buf[:0], -1
		for _, q := range r.Queues {
			if !w.queue(q) {
				return nil, false
			}
		}
		p.Released = append(p.Released, base64.RawStdEncoding.EncodeToString(w.buf))
	}
	if len(pending) == 0 {
		return p, true
	}
	w.buf, w.last = w.buf[:0], -1
	times := map[handoffTimes]int{}
	for _, h := range pending {
		if !w.queue(h.Queue) {
			return nil, false
		}
		w.client(h.From)
		w.client(h.To)
		k := handoffTimes{h.Since, h.Deadline}
		i, ok := times[k]
		if !ok {
			i = len(p.Times)
			times[k] = i
			p.Times = append(p.Times, k)
		}
		w.buf = binary.AppendUvarint(w.buf, uint64(i))
	}
	p.Pending = base64.RawStdEncoding.EncodeToString(w.buf)
	return p, true
}

// movesReader decodes what a movesWriter coded.
type movesReader struct {
	p      *packedMoves
	raw    []byte
	last   int
	lastID int64
	what   string
}

func (r *movesReader) fail(format string, args ...any) error {
	return fmt.Errorf("packed %s: %s", r.what, fmt.Sprintf(format, args...))
}

func (r *movesReader) uvarint() (uint64, error) {
	v, k := binary.Uvarint(r.raw)
	if k <= 0 {
		return 0, r.fail("a truncated or overlong varint")
	}
	r.raw = r.raw[k:]
	return v, nil
}

func (r *movesReader) queue() (abi.Queue, error) {
	d, k := binary.Varint(r.raw)
	if k <= 0 {
		return abi.Queue{}, r.fail("a truncated or overlong varint")
	}
	r.raw = r.raw[k:]
	b := int64(max(r.last, 0)) + d
	if d < -math.MaxInt32 || d > math.MaxInt32 || b < 0 || b >= int64(len(r.p.Brokers)) {
		return abi.Queue{}, r.fail("broker index outside the table of %d", len(r.p.Brokers))
	}
	v, err := r.uvarint()
	if err != nil {
		return abi.Queue{}, err
	}
	id := int64(v)
	if int(b) == r.last {
		id = r.lastID + 1 + int64(v)
	}
	if v > math.MaxInt32 || id > math.MaxInt32 {
		return abi.Queue{}, r.fail("queue id beyond %d", math.MaxInt32)
	}
	r.last, r.lastID = int(b), id
	ref := r.p.Brokers[b]
	return abi.Queue{Topic: ref.Topic, BrokerName: ref.Broker, QueueID: int32(id)}, nil
}

func (r *movesReader) client() (string, error) {
	i, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if i >= uint64(len(r.p.Clients)) {
		return "", r.fail("client index %d outside the table of %d", i, len(r.p.Clients))
	}
	return r.p.Clients[i], nil
}

// queues decodes a list of queues coded as the queues of Moves are.
func (p *packedMoves) queues(code, what string) ([]abi.Queue, error) {
	raw, err := base64.RawStdEncoding.DecodeString(code)
	if err != nil {
		return nil, fmt.Errorf("packed %s: %w", what, err)
	}
	r := &movesReader{p: p, raw: raw, last: -1, what: what}
	qs := make([]abi.Queue, 0, len(raw)/2) // a queue takes at least two bytes
	for len(r.raw) > 0 {
		q, err := r.queue()
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func (p *packedMoves) unpack() (moves []model.Move, pending []model.Handoff, err error) {
	if p.Format != packedMovesFormat {
		return nil, nil, fmt.Errorf("packed moves of format %q: this version reads %q", p.Format, packedMovesFormat)
	}
	raw, err := base64.RawStdEncoding.DecodeString(p.Moves)
	if err != nil {
		return nil, nil, fmt.Errorf("packed moves: %w", err)
	}
	r := &movesReader{p: p, raw: raw, last: -1, what: "moves"}
	moves = make([]model.Move, 0, len(raw)/4) // a move takes at least four bytes
	for len(r.raw) > 0 {
		var m model.Move
		if m.Queue, err = r.queue(); err != nil {
			return nil, nil, err
		}
		if m.From, err = r.client(); err != nil {
			return nil, nil, err
		}
		if m.To, err = r.client(); err != nil {
			return nil, nil, err
		}
		moves = append(moves, m)
	}
	if p.Pending == "" {
		return moves, nil, nil
	}
	if raw, err = base64.RawStdEncoding.DecodeString(p.Pending); err != nil {
		return nil, nil, fmt.Errorf("packed pending handoffs: %w", err)
	}
	r = &movesReader{p: p, raw: raw, last: -1, what: "pending handoffs"}
	pending = make([]model.Handoff, 0, len(raw)/5)
	for len(r.raw) > 0 {
		var h model.Handoff
		if h.Queue, err = r.queue(); err != nil {
			return nil, nil, err
		}
		if h.From, err = r.client(); err != nil {
			return nil, nil, err
		}
		if h.To, err = r.client(); err != nil {
			return nil, nil, err
		}
		i, err := r.uvarint()
		if err != nil {
			return nil, nil, err
		}
		if i >= uint64(len(p.Times)) {
			return nil, nil, r.fail("times index %d outside the table of %d", i, len(p.Times))
		}
		h.Since, h.Deadline = p.Times[i].Since, p.Times[i].Deadline
		pending = append(pending, h)
	}
	return moves, pending, nil
}
