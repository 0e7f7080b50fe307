package store_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// historyEntry has moves over two topics and brokers, with gaps, nobody as an owner, and
// pending handoffs with two deadlines.
func historyEntry() model.HistoryEntry {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return model.HistoryEntry{
		Group: "g", Topic: "T", Generation: 4, At: at, Handoff: model.HandoffCooperative, Members: 3, Queues: 5,
		Plugin: "sticky", PluginVersion: "v",
		Trigger: model.Trigger{Causes: []string{model.CauseJoined, model.CauseHandoff}, Joined: []string{"c@3"},
			Released: []model.Release{
				{Member: "a@1", Reason: model.ReleaseConfirmed, Queues: []abi.Queue{q("T", "broker-a", 3), q("T", "broker-b", 1), q("T", "broker-b", 4)}},
				{Member: "b@2", Reason: model.ReleaseLeft, Queues: []abi.Queue{}},
			}},
		Moves: []model.Move{
			{Queue: q("T", "broker-a", 0), From: "a@1", To: "c@3"},
			{Queue: q("T", "broker-a", 1), From: "", To: "a@1"},
			{Queue: q("T", "broker-a", 900), From: "b@2", To: ""},
			{Queue: q("T", "broker-b", 2), From: "b@2", To: "c@3"},
			{Queue: q("U", "broker-a", 0), From: "a@1", To: "b@2"},
		},
		Pending: []model.Handoff{
			{Queue: q("T", "broker-a", 900), From: "b@2", To: "c@3", Since: at, Deadline: at.Add(time.Minute)},
			{Queue: q("T", "broker-b", 7), From: "a@1", To: "c@3", Since: at.Add(-time.Second), Deadline: at.Add(time.Hour)},
		},
	}
}

// An entry reads back as it was written, with no queue or move spelled out; one without moves
// keeps its empty list (the API shows "moves": []).
func TestHistoryRecordRoundTrip(t *testing.T) {
	empty := historyEntry()
	empty.Moves, empty.Pending = []model.Move{}, nil
	for _, e := range []model.HistoryEntry{historyEntry(), empty} {
		b, err := store.MarshalHistoryEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "brokerName") || strings.Contains(string(b), `"moves":[`) {
			t.Errorf("record spells moves out: %s", b)
		}
		var got model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", got, e, b)
		}
		if at, err := store.RecordTime(b); err != nil || !at.Equal(e.At) {
			t.Errorf("RecordTime = %v, %v; want %v", at, err, e.At)
		}
		// A version before the packed form reads the record as an entry without moves.
		var old model.HistoryEntry
		if err := json.Unmarshal(b, &old); err != nil || old.Generation != e.Generation || len(old.Moves) != 0 {
			t.Errorf("the previous version reads %+v, %v", old, err)
		}
	}
}

// Records written before the packed form, and entries whose moves are out of queue order
// (written spelled out), read as they are.
func TestUnpackedHistoryRecord(t *testing.T) {
	e := historyEntry()
	old, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	e.Moves[0], e.Moves[1] = e.Moves[1], e.Moves[0]
	unordered, err := store.MarshalHistoryEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unordered), "brokerName") {
		t.Errorf("moves out of order were packed: %s", unordered)
	}
	for i, raw := range [][]byte{old, unordered, []byte(`{"generation":3,"at":"2026-01-01T00:00:00Z"}`)} {
		var got model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(raw, &got); err != nil {
			t.Fatal(err)
		}
		var want model.HistoryEntry
		json.Unmarshal(raw, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record %d read as\n%+v\nwant\n%+v", i, got, want)
		}
	}
}

// A damaged packed record is refused with an error naming what is wrong.
func TestDamagedHistoryRecord(t *testing.T) {
	b, err := store.MarshalHistoryEntry(historyEntry())
	if err != nil {
		t.Fatal(err)
	}
	// Each case damages a record of its format: one written now, or recordV1.
	recs := map[string]map[string]any{}
	for _, raw := range []string{string(b), recordV1} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatal(err)
		}
		recs[rec["packedMoves"].(map[string]any)["format"].(string)] = rec
	}
	if len(recs) != 2 {
		t.Fatalf("records of formats %v", recs)
	}
	code := func(vs ...int64) string {
		var buf []byte
		for i, v := range vs {
			if i == 0 {
				buf = binary.AppendVarint(buf, v)
			} else {
				buf = binary.AppendUvarint(buf, uint64(v))
			}
		}
		return base64.RawStdEncoding.EncodeToString(buf)
	}
	// Two runs: queue 0 of broker 0 to client 0, then from queue 0 of broker 1, n moves.
	twoRuns := func(n uint64) string {
		buf := binary.AppendVarint(nil, 0)
		buf = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(buf, 0), 0), 0)
		buf = binary.AppendVarint(buf, 1)
		buf = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(buf, 0), 0), 1)
		return base64.RawStdEncoding.EncodeToString(binary.AppendUvarint(buf, n-2))
	}
	for _, c := range []struct {
		format string // of the record the case damages
		field  string
		value  any
		want   string
	}{
		{"allocd-moves-2", "format", "allocd-moves-9", "format"},
		{"allocd-moves-2", "moves", "!!", "illegal base64"},
		{"allocd-moves-2", "moves", code(0, 1, 0), "truncated"},
		{"allocd-moves-2", "moves", code(7, 1, 0, 0), "broker index"},
		{"allocd-moves-2", "moves", code(0, 1<<31, 0, 0), "queue id"},
		{"allocd-moves-2", "moves", code(0, 1, 0, 99<<1), "client index"},
		{"allocd-moves-2", "moves", code(0, 1, 0, 1), "truncated"},              // a run without its length
		{"allocd-moves-2", "moves", code(0, 1, 0, 1, 1<<20+1), "a run of more"}, // one run past the bound
		{"allocd-moves-2", "moves", code(0, 1<<31-3, 0, 1, 2), "queue id"},      // a run past the last id
		{"allocd-moves-2", "moves", twoRuns(1 << 20), "more than 1048576"},      // runs past the bound
		{"allocd-moves-2", "pending", code(0, 1, 0, 0, 5), "times index"},
		{"allocd-moves-2", "pending", code(0, 1, 0, 1, 1<<20, 0), "more than 1048576"},
		{"allocd-moves-2", "released", []string{code(0, 1)}, "packed releases"},
		{"allocd-moves-2", "released", []string{code(0, 1), code(9, 1)}, "broker index"},
		{"allocd-moves-1", "moves", code(0, 1, 0), "truncated"},
		{"allocd-moves-1", "moves", code(7, 1, 0, 0), "broker index"},
		{"allocd-moves-1", "moves", code(0, 1<<31, 0, 0), "queue id"},
		{"allocd-moves-1", "moves", code(0, 1, 0, 99), "client index"},
		{"allocd-moves-1", "pending", code(0, 1, 0, 0, 5), "times index"},
	} {
		rec := recs[c.format]
		p := map[string]any{}
		for k, v := range rec["packedMoves"].(map[string]any) {
			p[k] = v
		}
		p[c.field] = c.value
		raw, _ := json.Marshal(withField(rec, "packedMoves", p))
		var e model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(raw, &e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s = %v: error %v, want one saying %q", c.format, c.field, c.value, err, c.want)
		}
	}
	both := strings.Replace(string(b), `"packedMoves"`, `"moves":[{"queue":{"topic":"T","brokerName":"b","queueId":1},"from":"a","to":""}],"packedMoves"`, 1)
	var e model.HistoryEntry
	if err := store.UnmarshalHistoryEntry([]byte(both), &e); err == nil {
		t.Error("a record with packed and unpacked moves was read")
	}
}

// withField is a copy of m with k set to v.
func withField(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for k2, v2 := range m {
		if k2 != k {
			out[k2] = v2
		}
	}
	return out
}

// recordV1 is historyEntry's record as allocd-moves-1 wrote it, a move at a time.
const recordV1 = `{"group":"g","topic":"T","generation":4,"at":"2026-01-01T00:00:00Z","trigger":{"causes":["joined","handoff"],"joined":["c@3"],"released":[{"member":"a@1","reason":"confirmed","queues":null},{"member":"b@2","reason":"left","queues":null}]},"plugin":"sticky","pluginVersion":"v","handoff":"cooperative","members":3,"queues":5,"packedMoves":{"format":"allocd-moves-1","brokers":[{"topic":"T","broker":"broker-a"},{"topic":"T","broker":"broker-b"},{"topic":"U","broker":"broker-a"}],"clients":["a@1","c@3","","b@2"],"moves":"AAAAAQAAAgAAggcDAgICAwECAAAD","times":[{"since":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:01:00Z"},{"since":"2025-12-31T23:59:59Z","deadline":"2026-01-01T01:00:00Z"}],"pending":"AIQHAwEAAgcAAQE","released":["AAMCAQAC",""]}}`

// A record written a move at a time, by the versions before runs, reads as it was written.
func TestHistoryRecordMoves1(t *testing.T) {
	var got model.HistoryEntry
	if err := store.UnmarshalHistoryEntry([]byte(recordV1), &got); err != nil {
		t.Fatal(err)
	}
	if want := historyEntry(); !reflect.DeepEqual(got, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", got, want)
	}
}

// A rebalance of averagely's shape (a member joins in the middle: each following member's block
// of queues moves on to the next member) packs into runs, a few bytes each, and reads back the
// same; runs end where the broker, the owners, a handoff's times or the queue ids' sequence do.
func TestHistoryRecordRuns(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := model.HistoryEntry{Group: "g", Topic: "T", Generation: 9, At: at, Members: 101, Queues: 4000, Moves: []model.Move{}}
	runs := 0
	for b := range 4 {
		broker := fmt.Sprintf("broker-%d", b)
		for id := range 1000 {
			if id == 500 && b == 1 {
				continue // a gap: the run before it ends
			}
			member := (b*1000 + id) / 10
			if id%10 == 0 || id == 501 && b == 1 {
				runs++
			}
			e.Moves = append(e.Moves, model.Move{Queue: q("T", broker, int32(id)), From: fmt.Sprintf("c%03d", member), To: fmt.Sprintf("c%03d", member+1)})
		}
	}
	for id := range 40 {
		deadline := at.Add(time.Minute)
		if id >= 25 {
			deadline = at.Add(time.Hour) // the run ends where the times change
		}
		e.Pending = append(e.Pending, model.Handoff{Queue: q("T", "broker-0", int32(id)), From: "c000", To: "c001", Since: at, Deadline: deadline})
	}
	b, err := store.MarshalHistoryEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Packed struct{ Format, Moves, Pending string } `json:"packedMoves"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	moves, _ := base64.RawStdEncoding.DecodeString(rec.Packed.Moves)
	pending, _ := base64.RawStdEncoding.DecodeString(rec.Packed.Pending)
	if rec.Packed.Format != "allocd-moves-2" || len(moves) > 8*runs || len(pending) > 2*8 {
		t.Errorf("format %s: %d moves in %d runs took %d bytes; 40 pending handoffs in 2 runs took %d", rec.Packed.Format, len(e.Moves), runs, len(moves), len(pending))
	}
	var got model.HistoryEntry
	if err := store.UnmarshalHistoryEntry(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		for i := range min(len(got.Moves), len(e.Moves)) {
			if got.Moves[i] != e.Moves[i] {
				t.Fatalf("move %d read back as %+v, want %+v", i, got.Moves[i], e.Moves[i])
			}
		}
		t.Fatalf("read back %d moves, %d pending; want %d, %d", len(got.Moves), len(got.Pending), len(e.Moves), len(e.Pending))
	}
	// Written again from what was read, the record is the same bytes.
	again, err := store.MarshalHistoryEntry(got)
	if err != nil || string(again) != string(b) {
		t.Fatalf("written again: %v\n%s\nwant\n%s", err, again, b)
	}
}

// Any record either is refused or reads as an entry that writes and reads back the same.
func FuzzHistoryRecord(f *testing.F) {
	b, _ := store.MarshalHistoryEntry(historyEntry())
	f.Add(b)
	old, _ := json.Marshal(historyEntry())
	f.Add(old)
	f.Add([]byte(`{"packedMoves":{"format":"allocd-moves-1","brokers":[{"topic":"T","broker":"b"}],"clients":["a"],"moves":"AAAAAA"}}`))
	f.Add([]byte(recordV1))
	f.Add([]byte(`{"packedMoves":{"format":"allocd-moves-2","brokers":[{"topic":"T","broker":"b"}],"clients":["a","b"],"moves":"AAAABQMCAAED"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(raw, &e); err != nil {
			return
		}
		again, err := store.MarshalHistoryEntry(e)
		if err != nil {
			return // a time json cannot write
		}
		var back model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(again, &back); err != nil {
			t.Fatalf("%v reading back %s", err, again)
		}
		if len(back.Moves) != len(e.Moves) || len(back.Pending) != len(e.Pending) {
			t.Fatalf("%d moves, %d pending read back as %d, %d", len(e.Moves), len(e.Pending), len(back.Moves), len(back.Pending))
		}
	})
}
