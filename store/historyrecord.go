package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// A history record is the entry's JSON (model.HistoryEntry, as the API shows it) with its moves
// and pending handoffs packed: the brokers and client ids they name are listed once, and each
// run of moves (queues one after the other on a broker, from one owner to one other) is four or
// five varints (broker, first queue id, previous and new owner, length) in one base64 string.
// When a 10,000-member averagely generation moves 50,000 queues in 5,000 runs, the moves take
// tens of kilobytes instead of megabytes of {"queue":{...},"from":..,"to":..}. Records
// written before are read as they are: spelled out (with "moves" and "pending"), or packed a
// move at a time (allocd-moves-1). A version before allocd-moves-1 reads a packed record as an
// entry without moves.

// Packed forms of a history record's moves: packedMovesFormat is written, both are read.
const (
	packedMovesFormat   = "allocd-moves-2" // runs
	packedMovesFormatV1 = "allocd-moves-1" // a move at a time
)

// maxUnpacked bounds the moves, and the pending handoffs, a packed record unpacks to: a run is a
// few bytes however long, so its length, not the record's size, bounds what reading it takes.
// A topic has at most 1,024 queues a broker; this is 1,024 brokers of them.
const maxUnpacked = 1 << 20

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
	// Moves is base64 of, per run of moves (allocd-moves-2): the zigzag varint of its broker's
	// index minus the previous run's (the first: minus 0), the uvarint of its first queue id
	// (minus the previous run's last id plus one when the broker is the same), the uvarint of
	// its previous owner's index in Clients, the uvarint of its new owner's index times two,
	// plus one when the run is longer than one move, and then the uvarint of its length minus
	// two. A run's moves are of its first queue id and those after it, one by one. In
	// allocd-moves-1 every move is a run of one and the new owner's index is not doubled.
	Moves string `json:"moves"`
	// Pending is coded as Moves, each run of handoffs (which share their times) followed by the
	// uvarint of its index in Times.
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
	pk := NewMovesPacker()
	ok := true
	for _, m := range e.Moves {
		ok = ok && pk.Move(m.Queue, pk.Client(m.From), pk.Client(m.To))
	}
	ok = ok && pk.Released(e.Trigger.Released)
	for _, h := range e.Pending {
		ok = ok && pk.Pending(h.Queue, pk.Client(h.From), pk.Client(h.To), h.Since, h.Deadline)
	}
	if !ok {
		return json.Marshal(e) // moves out of order: spelled out, as they were
	}
	e.Moves, e.Pending = nil, nil
	return MarshalPackedHistoryEntry(e, pk)
}

// ErrMovesOutOfOrder is matched by the error of MarshalPackedHistoryEntry when its packer was
// given an entry that is not after the previous one of its broker: such moves are stored
// spelled out (MarshalHistoryEntry).
var ErrMovesOutOfOrder = errors.New("history moves out of queue order")

// MarshalPackedHistoryEntry writes the history record of e with the moves, the releases' queues
// and the pending handoffs that pk coded: the record MarshalHistoryEntry writes for e with
// those Moves, Pending and Trigger.Released, without building them first. e.Moves and e.Pending
// must be empty; pk must have coded e.Trigger.Released. pk's last runs are closed, and nothing
// else is changed: the record may be written again.
func MarshalPackedHistoryEntry(e model.HistoryEntry, pk *MovesPacker) ([]byte, error) {
	return AppendPackedHistoryEntry(nil, e, pk)
}

// AppendPackedHistoryEntry appends to dst the record MarshalPackedHistoryEntry writes.
func AppendPackedHistoryEntry(dst []byte, e model.HistoryEntry, pk *MovesPacker) ([]byte, error) {
	switch {
	case pk.failed:
		return nil, ErrMovesOutOfOrder
	case len(e.Moves) > 0 || len(e.Pending) > 0:
		return nil, errors.New("history entry with both packed and unpacked moves")
	case pk.releases != len(e.Trigger.Released):
		return nil, fmt.Errorf("history entry with %d releases, %d of them packed", len(e.Trigger.Released), pk.releases)
	}
	pk.moves.close()
	pk.pending.close()
	// Moves and Pending are base64, which encoding/json writes as it is: it writes the record
	// around placeholders, and the codes go in after, so that a megabyte of them is neither
	// copied into strings nor scanned for escapes.
	p := *pk.p
	p.Moves = ""
	if pk.pendings > 0 {
		p.Pending = "-"
	}
	r := historyRecord{HistoryEntry: e, Packed: &p}
	r.HistoryEntry.Moves, r.HistoryEntry.Pending = nil, nil
	if len(e.Trigger.Released) > 0 {
		r.Trigger.Released = make([]model.Release, len(e.Trigger.Released))
		for i, rel := range e.Trigger.Released {
			r.Trigger.Released[i] = model.Release{Member: rel.Member, Reason: rel.Reason}
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return splicePackedMoves(dst, b, pk.moves.buf, pk.pendings > 0, pk.pending.buf)
}

// splicePackedMoves appends to dst b with the base64 of moves and of pending (when there is
// any) in place of its placeholders, b being a record written with "moves":"" and
// "pending":"-". The record's packedMoves is its last field, and nothing inside it before
// "moves" and "pending" is a key of that name (a key is followed by a colon, a string value
// never is, and quotes inside strings are escaped), so the last "packedMoves" and the first
// keys after it are those.
func splicePackedMoves(dst, b, moves []byte, hasPending bool, pending []byte) ([]byte, error) {
	const packedKey, movesKey, pendingKey = `"packedMoves":{`, `"moves":""`, `"pending":"-"`
	at := bytes.LastIndex(b, []byte(packedKey))
	if at < 0 {
		return nil, errors.New("history record without its packed moves")
	}
	m := bytes.Index(b[at:], []byte(movesKey))
	if m < 0 {
		return nil, errors.New("history record without its packed moves' placeholder")
	}
	m += at + len(movesKey) - 1 // the closing quote
	p := len(b)
	if hasPending {
		i := bytes.Index(b[m:], []byte(pendingKey))
		if i < 0 {
			return nil, errors.New("history record without its pending handoffs' placeholder")
		}
		p = m + i + len(pendingKey) - 2 // the placeholder
	}
	enc := base64.RawStdEncoding
	out := slices.Grow(dst, len(b)+enc.EncodedLen(len(moves))+enc.EncodedLen(len(pending)))
	out = enc.AppendEncode(append(out, b[:m]...), moves)
	if !hasPending {
		return append(out, b[m:]...), nil
	}
	out = enc.AppendEncode(append(out, b[m:p]...), pending)
	return append(out, b[p+1:]...), nil
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

// MovesPacker codes a history entry's moves, its releases' queues and its pending handoffs as
// they are found, over one broker table and one client table, for MarshalPackedHistoryEntry: a
// rebalance that moves 50,000 queues codes them from its owner slices without building a
// model.Move for each. Each kind must come in queue order; the owners are indices that Client
// handed out. The zero MovesPacker is not usable; NewMovesPacker makes one.
type MovesPacker struct {
	p       *packedMoves
	brokers map[brokerRef]int
	clients map[string]int
	times   map[handoffTimes]int
	moves   movesWriter
	pending movesWriter
	// releases and pendings count what was coded; failed is set by an entry out of order.
	releases, pendings int
	lastTimes          int // the previous handoff's index in p.Times
	failed             bool
	clientRoom         int // the client ids clients was made for (Grow)
}

// Reset empties pk for another entry, keeping its buffers and the room of its tables: the
// next rebalance of a 100,000-queue topic codes its moves into the last one's 1.5 MB instead
// of allocating them again (RATIONALE.md, "Why a rebalance's buffers are kept for the next").
// What pk coded before must not be read after.
func (pk *MovesPacker) Reset() {
	p := pk.p
	*p = packedMoves{Format: packedMovesFormat, Brokers: p.Brokers[:0], Clients: p.Clients[:0], Times: p.Times[:0]}
	clear(pk.brokers)
	clear(pk.clients)
	clear(pk.times)
	pk.moves = movesWriter{pk: pk, buf: pk.moves.buf[:0], last: -1}
	pk.pending = movesWriter{pk: pk, buf: pk.pending.buf[:0], last: -1, timed: true}
	pk.releases, pk.pendings, pk.lastTimes, pk.failed = 0, 0, 0, false
}

// NewMovesPacker returns an empty packer.
func NewMovesPacker() *MovesPacker {
	pk := &MovesPacker{
		p:       &packedMoves{Format: packedMovesFormat, Brokers: []brokerRef{}, Clients: []string{}},
		brokers: map[brokerRef]int{}, clients: map[string]int{},
	}
	pk.moves = movesWriter{pk: pk, last: -1}
	pk.pending = movesWriter{pk: pk, last: -1, timed: true}
	return pk
}

// Grow makes room for about moves moves, pending handoffs and clients client ids, so that
// coding 50,000 moves does not grow their buffers through a dozen copies.
func (pk *MovesPacker) Grow(moves, pending, clients int) {
	pk.moves.buf = slices.Grow(pk.moves.buf, 6*moves) // a move is about 6 bytes of varints
	pk.pending.buf = slices.Grow(pk.pending.buf, 7*pending)
	if len(pk.clients) == 0 && clients > pk.clientRoom {
		pk.clients = make(map[string]int, clients)
		pk.clientRoom = clients
	}
	pk.p.Clients = slices.Grow(pk.p.Clients, clients)
}

// Client is cid's index in the client table ("" is nobody), added if it is not there yet.
func (pk *MovesPacker) Client(cid string) uint64 {
	i, ok := pk.clients[cid]
	if !ok {
		i = len(pk.p.Clients)
		pk.clients[cid] = i
		pk.p.Clients = append(pk.p.Clients, cid)
	}
	return uint64(i)
}

// Move codes q's move from client from to client to; it fails (and so does the record) when q
// is not after the previous move's queue of its broker.
func (pk *MovesPacker) Move(q abi.Queue, from, to uint64) bool {
	if !pk.moves.run(q, from, to, 0) {
		pk.failed = true
		return false
	}
	return true
}

// Released codes the queues of releases, the trigger's, each list in queue order.
func (pk *MovesPacker) Released(releases []model.Release) bool {
	var w movesWriter
	for _, r := range releases {
		w = movesWriter{pk: pk, buf: w.buf[:0], last: -1}
		for _, q := range r.Queues {
			if !w.queue(q) {
				pk.failed = true
				return false
			}
		}
		pk.p.Released = append(pk.p.Released, base64.RawStdEncoding.EncodeToString(w.buf))
		pk.releases++
	}
	return true
}

// Pending codes a handoff under way of q from client from to client to.
func (pk *MovesPacker) Pending(q abi.Queue, from, to uint64, since, deadline time.Time) bool {
	if pk.times == nil {
		pk.times = map[handoffTimes]int{}
	}
	k := handoffTimes{since, deadline}
	i := pk.lastTimes // handoffs come in runs of the same times: no map lookup for those
	if pk.pendings == 0 || pk.p.Times[i] != k {
		var ok bool
		if i, ok = pk.times[k]; !ok {
			i = len(pk.p.Times)
			pk.times[k] = i
			pk.p.Times = append(pk.p.Times, k)
		}
		pk.lastTimes = i
	}
	if !pk.pending.run(q, from, to, i) {
		pk.failed = true
		return false
	}
	pk.pendings++
	return true
}

// movesWriter codes one list of queues over its packer's broker table, or (run) one list of
// runs of moves or of handoffs.
type movesWriter struct {
	pk     *MovesPacker
	buf    []byte
	last   int   // the previous entry's broker, -1 before the first
	lastID int32 // and its queue id (an open run's: its last)
	// The open run: its length (0 when none), owners and index in Times (timed: handoffs).
	// Its queue and previous owner are in buf already; close writes the rest.
	n        int
	from, to uint64
	times    int
	timed    bool
}

// run codes q's move from client from to client to (and its times' index, for a handoff),
// extending the open run when q is the next queue of its broker and the rest is the same.
func (w *movesWriter) run(q abi.Queue, from, to uint64, times int) bool {
	if w.n > 0 && from == w.from && to == w.to && times == w.times && q.QueueID > w.lastID && q.QueueID-w.lastID == 1 {
		if ref := w.pk.p.Brokers[w.last]; ref.Broker == q.BrokerName && ref.Topic == q.Topic {
			w.n++
			w.lastID = q.QueueID
			return true
		}
	}
	w.close()
	if !w.queue(q) {
		return false
	}
	w.buf = binary.AppendUvarint(w.buf, from)
	w.n, w.from, w.to, w.times = 1, from, to, times
	return true
}

// close writes the open run's new owner, its length and its times' index.
func (w *movesWriter) close() {
	switch {
	case w.n == 0:
		return
	case w.n == 1:
		w.buf = binary.AppendUvarint(w.buf, w.to<<1)
	default:
		w.buf = binary.AppendUvarint(binary.AppendUvarint(w.buf, w.to<<1|1), uint64(w.n-2))
	}
	if w.timed {
		w.buf = binary.AppendUvarint(w.buf, uint64(w.times))
	}
	w.n = 0
}

// queue codes q; it fails when q is not after the previous entry of its broker.
func (w *movesWriter) queue(q abi.Queue) bool {
	p := w.pk.p
	b := w.last
	if b < 0 || p.Brokers[b].Broker != q.BrokerName || p.Brokers[b].Topic != q.Topic {
		ref := brokerRef{q.Topic, q.BrokerName}
		var ok bool
		if b, ok = w.pk.brokers[ref]; !ok {
			b = len(p.Brokers)
			w.pk.brokers[ref] = b
			p.Brokers = append(p.Brokers, ref)
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
	return r.clientAt(i)
}

// clientAt is entry i of the client table.
func (r *movesReader) clientAt(i uint64) (string, error) {
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

// run reads what follows a run's previous owner: its new owner and its length (a move's new
// owner, in allocd-moves-1), and moves past the run's queue ids. total counts the entries read
// so far, against maxUnpacked.
func (r *movesReader) run(runs bool, total *int) (to string, n int, err error) {
	v, err := r.uvarint()
	if err != nil {
		return "", 0, err
	}
	n = 1
	if runs {
		if v&1 == 1 {
			m, err := r.uvarint()
			if err != nil {
				return "", 0, err
			}
			if m > maxUnpacked {
				return "", 0, r.fail("a run of more than %d", maxUnpacked)
			}
			n = int(m) + 2
		}
		v >>= 1
	}
	if to, err = r.clientAt(v); err != nil {
		return "", 0, err
	}
	if r.lastID+int64(n-1) > math.MaxInt32 {
		return "", 0, r.fail("queue id beyond %d", math.MaxInt32)
	}
	if *total += n; *total > maxUnpacked {
		return "", 0, r.fail("more than %d entries", maxUnpacked)
	}
	r.lastID += int64(n - 1)
	return to, n, nil
}

func (p *packedMoves) unpack() (moves []model.Move, pending []model.Handoff, err error) {
	if p.Format != packedMovesFormat && p.Format != packedMovesFormatV1 {
		return nil, nil, fmt.Errorf("packed moves of format %q: this version reads %q and %q", p.Format, packedMovesFormat, packedMovesFormatV1)
	}
	runs := p.Format == packedMovesFormat
	raw, err := base64.RawStdEncoding.DecodeString(p.Moves)
	if err != nil {
		return nil, nil, fmt.Errorf("packed moves: %w", err)
	}
	r := &movesReader{p: p, raw: raw, last: -1, what: "moves"}
	moves = make([]model.Move, 0, len(raw)/4) // a run takes at least four bytes
	total := 0
	for len(r.raw) > 0 {
		var m model.Move
		if m.Queue, err = r.queue(); err != nil {
			return nil, nil, err
		}
		if m.From, err = r.client(); err != nil {
			return nil, nil, err
		}
		to, n, err := r.run(runs, &total)
		if err != nil {
			return nil, nil, err
		}
		m.To = to
		for range n {
			moves = append(moves, m)
			m.Queue.QueueID++
		}
	}
	if p.Pending == "" {
		return moves, nil, nil
	}
	if raw, err = base64.RawStdEncoding.DecodeString(p.Pending); err != nil {
		return nil, nil, fmt.Errorf("packed pending handoffs: %w", err)
	}
	r = &movesReader{p: p, raw: raw, last: -1, what: "pending handoffs"}
	pending = make([]model.Handoff, 0, len(raw)/5)
	total = 0
	for len(r.raw) > 0 {
		var h model.Handoff
		if h.Queue, err = r.queue(); err != nil {
			return nil, nil, err
		}
		if h.From, err = r.client(); err != nil {
			return nil, nil, err
		}
		to, n, err := r.run(runs, &total)
		if err != nil {
			return nil, nil, err
		}
		h.To = to
		i, err := r.uvarint()
		if err != nil {
			return nil, nil, err
		}
		if i >= uint64(len(p.Times)) {
			return nil, nil, r.fail("times index %d outside the table of %d", i, len(p.Times))
		}
		h.Since, h.Deadline = p.Times[i].Since, p.Times[i].Deadline
		for range n {
			pending = append(pending, h)
			h.Queue.QueueID++
		}
	}
	return moves, pending, nil
}
