package coordinator

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// randomGeneration assigns the queues of brokers x perBroker to some of keys (a queue may go to
// nobody), with client ids for the keys and, when handoffs, some queues held back from their
// owner in queue order.
func randomGeneration(r *rand.Rand, keys []string, cidSuffix string, brokers, perBroker int, handoffs bool) *store.Generation {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gen := &store.Generation{Group: "g", Topic: "T", Assignment: map[string][]abi.Queue{}, CIDs: map[string]string{}}
	for _, k := range keys {
		gen.Assignment[k] = []abi.Queue{}
		gen.CIDs[k] = k + cidSuffix
	}
	var hs []model.Handoff
	for b := range brokers {
		for id := range perBroker {
			q := abi.Queue{Topic: "T", BrokerName: fmt.Sprintf("broker-%d", b), QueueID: int32(id * 2)}
			if r.IntN(10) == 0 {
				continue // nobody's
			}
			k := keys[r.IntN(len(keys))]
			if handoffs && r.IntN(4) == 0 {
				from := keys[r.IntN(len(keys))]
				since := at.Add(time.Duration(r.IntN(2)) * time.Second)
				hs = append(hs, model.Handoff{Queue: q, From: from, To: k, Since: since, Deadline: since.Add(time.Minute)})
				continue
			}
			gen.Assignment[k] = append(gen.Assignment[k], q)
		}
	}
	gen.Handoffs = store.HandoffsOf(hs)
	return gen
}

// naiveMoves is moves the plain way: each queue's owner by client id in a map per generation,
// the queues whose owners differ sorted.
func naiveMoves(old, gen *store.Generation) []model.Move {
	owners := func(g *store.Generation) map[abi.Queue]string {
		m := map[abi.Queue]string{}
		if g != nil {
			for key, qs := range g.Assignment {
				for _, q := range qs {
					m[q] = cidOf(g, key)
				}
			}
		}
		return m
	}
	before, after := owners(old), owners(gen)
	var out []model.Move
	for _, m := range []map[abi.Queue]string{before, after} {
		for q := range m {
			if before[q] != after[q] && !slices.ContainsFunc(out, func(mv model.Move) bool { return mv.Queue == q }) {
				out = append(out, model.Move{Queue: q, From: before[q], To: after[q]})
			}
		}
	}
	slices.SortFunc(out, func(a, b model.Move) int { return abi.CompareQueues(a.Queue, b.Queue) })
	return out
}

// The history record coded from owner slots (packHistoryMoves) is byte for byte the one
// MarshalHistoryEntry writes for the spelled-out moves and pending handoffs, whatever moved:
// queues between members, to and from nobody, a restarted member's new client id, with and
// without a table of the queues, with releases, by a packer that coded the round before; and it
// reads back as those moves.
func TestPackedHistoryMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c", "d", "e"}
	pk := store.NewMovesPacker()
	var buf []byte
	for round := range 40 {
		old := randomGeneration(r, keys[:2+r.IntN(3)], "@1", 1+r.IntN(3), 1+r.IntN(20), false)
		gen := randomGeneration(r, keys[r.IntN(2):], "@1", 1+r.IntN(3), 1+r.IntN(20), round%2 == 0)
		if round%3 == 0 {
			gen.CIDs["c"] = "c@2" // restarted under its instance id: its queues move to the new id
		}
		if round%5 == 0 {
			old = nil // the first generation
		}
		var table *store.QueueTable
		if round%4 == 2 {
			table = store.NewQueueTable(gen.Assignment) // lacks old's queues: rebuilt
		}
		var released []model.Release
		if gen.Handoffs.Len() > 0 {
			released = []model.Release{{Member: "a@1", Reason: model.ReleaseConfirmed, Queues: []abi.Queue{gen.Handoffs.Queue(0)}}}
		}
		e := model.HistoryEntry{Group: "g", Topic: "T", Generation: int64(round + 1), At: time.Unix(int64(round), 0).UTC(),
			Trigger: model.Trigger{Causes: []string{model.CauseJoined}, Released: released}}
		// Half the rounds start from the owners the entry before found (old's over older), over
		// a table of all three generations' queues.
		var prev *slotOwners
		if round%2 == 1 && old != nil {
			older := randomGeneration(r, keys, "@1", 2, 10, false)
			table = store.NewQueueTable(older.Assignment, old.Assignment, gen.Assignment)
			if _, prev, _ = packHistoryMoves(store.NewMovesPacker(), older, old, table, nil, nil); prev == nil || prev.gen != old {
				t.Fatalf("round %d: no owners kept for the next entry", round)
			}
			if round%4 == 3 {
				prev.gen = older // describes another generation: ignored
			}
		}
		// One packer and one buffer serve every round, emptied in between, as the
		// coordinator's historyScratch keeps them.
		pk.Reset()
		n, next, ok := packHistoryMoves(pk, old, gen, table, released, prev)
		if !ok || next == nil || next.gen != gen {
			t.Fatalf("round %d: not packed", round)
		}
		got, err := store.AppendPackedHistoryEntry(buf[:0], e, pk)
		if err != nil {
			t.Fatal(err)
		}
		buf = got
		spelled := e
		spelled.Moves, spelled.Pending = moves(old, gen, table), handoffsByCID(gen)
		want, err := store.MarshalHistoryEntry(spelled)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: packed from owner slots\n%s\nwant\n%s", round, got, want)
		}
		if naive := naiveMoves(old, gen); fmt.Sprint(spelled.Moves) != fmt.Sprint(naive) {
			t.Fatalf("round %d: moves %v, want %v", round, spelled.Moves, naive)
		}
		if n != len(spelled.Moves) {
			t.Errorf("round %d: %d moves counted, %d listed", round, n, len(spelled.Moves))
		}
		var back model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(got, &back); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back.Moves, back.Pending) != fmt.Sprint(spelled.Moves, spelled.Pending) {
			t.Errorf("round %d: read back %v %v, want %v %v", round, back.Moves, back.Pending, spelled.Moves, spelled.Pending)
		}
	}
}

// A release's queues out of queue order are not packed from slots: the caller spells them out,
// as MarshalHistoryEntry does, rather than storing a record that cannot be read back. (A
// generation's handoffs are in queue order by construction, store.Handoffs.)
func TestPackedHistoryMovesOutOfOrder(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	qa, qb := abi.Queue{Topic: "T", BrokerName: "b", QueueID: 1}, abi.Queue{Topic: "T", BrokerName: "b", QueueID: 2}
	gen := &store.Generation{Group: "g", Topic: "T", Assignment: map[string][]abi.Queue{"x": {}},
		Handoffs: store.HandoffsOf([]model.Handoff{{Queue: qb, From: "y", To: "x", Since: at, Deadline: at}, {Queue: qa, From: "y", To: "x", Since: at, Deadline: at}})}
	released := []model.Release{{Member: "y", Reason: model.ReleaseConfirmed, Queues: []abi.Queue{qb, qa}}}
	if _, _, ok := packHistoryMoves(store.NewMovesPacker(), nil, gen, nil, released, nil); ok {
		t.Fatal("a release's queues out of order were packed")
	}
	released[0].Queues = []abi.Queue{qa, qb}
	if _, _, ok := packHistoryMoves(store.NewMovesPacker(), nil, gen, nil, released, nil); !ok {
		t.Fatal("queues in order were not packed")
	}
}
