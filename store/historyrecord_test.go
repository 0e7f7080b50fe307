package store_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
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
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	orig := rec["packedMoves"].(map[string]any)
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
	for _, c := range []struct {
		field string
		value any
		want  string
	}{
		{"format", "allocd-moves-9", "format"},
		{"moves", "!!", "illegal base64"},
		{"moves", code(0, 1, 0), "truncated"},
		{"moves", code(7, 1, 0, 0), "broker index"},
		{"moves", code(0, 1<<31, 0, 0), "queue id"},
		{"moves", code(0, 1, 0, 99), "client index"},
		{"pending", code(0, 1, 0, 0, 5), "times index"},
		{"released", []string{code(0, 1)}, "packed releases"},
		{"released", []string{code(0, 1), code(9, 1)}, "broker index"},
	} {
		p := map[string]any{}
		for k, v := range orig {
			p[k] = v
		}
		p[c.field] = c.value
		rec["packedMoves"] = p
		raw, _ := json.Marshal(rec)
		var e model.HistoryEntry
		if err := store.UnmarshalHistoryEntry(raw, &e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: error %v, want one saying %q", c.field, c.value, err, c.want)
		}
	}
	both := strings.Replace(string(b), `"packedMoves"`, `"moves":[{"queue":{"topic":"T","brokerName":"b","queueId":1},"from":"a","to":""}],"packedMoves"`, 1)
	var e model.HistoryEntry
	if err := store.UnmarshalHistoryEntry([]byte(both), &e); err == nil {
		t.Error("a record with packed and unpacked moves was read")
	}
}

// Any record either is refused or reads as an entry that writes and reads back the same.
func FuzzHistoryRecord(f *testing.F) {
	b, _ := store.MarshalHistoryEntry(historyEntry())
	f.Add(b)
	old, _ := json.Marshal(historyEntry())
	f.Add(old)
	f.Add([]byte(`{"packedMoves":{"format":"allocd-moves-1","brokers":[{"topic":"T","broker":"b"}],"clients":["a"],"moves":"AAAAAA"}}`))
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
