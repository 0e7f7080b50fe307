package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// The hand-written packed record is exactly what encoding/json writes for the same record:
// decoded and encoded again by encoding/json, it comes back byte for byte, escapes included.
func TestPackedRecordIsJSON(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	q := func(broker string, id int32) abi.Queue {
		return abi.Queue{Topic: "T<&>", BrokerName: broker, QueueID: id}
	}
	gens := []Generation{
		{Group: "g", Topic: "T", Target: map[string][]abi.Queue{"a": {q("b", 1)}}},
		{Group: "g\"q", Topic: "T<&>", Number: 9, Inputs: "in\u2028", Plugin: "p", PluginVersion: "v\\", At: at,
			CIDs: map[string]string{"z": "z@1", "é": "e@\x01", "a": "a<b>"},
			Assignment: map[string][]abi.Queue{
				"z": {q("b", 3), q("b", 1), q("a", 70000)}, "é": {}, "a": {q("a", 0), q("a", 2), q("a", 1)},
			},
			Target: map[string][]abi.Queue{"a": {q("a", 0)}, "z": {q("b", 3), q("b", 2)}},
			Handoffs: HandoffsOf([]model.Handoff{
				{Queue: q("b", 2), From: "é", To: "z", Since: at, Deadline: at.Add(time.Minute)},
				{Queue: q("a", 2), From: "a", To: "z", Since: at, Deadline: at.Add(time.Hour)},
				{Queue: q("b", 3), From: "é", To: "z", Since: at, Deadline: at.Add(time.Minute)},
			})},
	}
	for _, g := range gens {
		b, err := g.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var r generationRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) {
			t.Errorf("wrote\n%s\nencoding/json writes\n%s", b, again)
		}
	}
	bad := Generation{Group: "g", Topic: "T", Assignment: map[string][]abi.Queue{}, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := bad.MarshalJSON(); err == nil {
		t.Error("a time in the year 10000 was written")
	}
}

// A record packed over a given table (PackOver) reads back as the same generation when the
// table has more queues than the generation names, and is the record of the generation's own
// table when the given one lacks a queue.
func TestPackOver(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := func(broker string, id int32) abi.Queue { return abi.Queue{Topic: "T", BrokerName: broker, QueueID: id} }
	var all []abi.Queue
	for _, b := range []string{"a", "b", "c"} {
		for id := range int32(50) {
			all = append(all, q(b, id))
		}
	}
	g := Generation{Group: "g", Topic: "T", Number: 3, At: at, CIDs: map[string]string{"x": "x@1"},
		Assignment: map[string][]abi.Queue{"x": {q("a", 1), q("b", 7)}, "y": {q("c", 49)}},
		Target:     map[string][]abi.Queue{"x": {q("a", 1), q("b", 7)}, "y": {q("c", 49), q("a", 3)}},
		Handoffs:   HandoffsOf([]model.Handoff{{Queue: q("a", 3), From: "x", To: "y", Since: at, Deadline: at.Add(time.Minute)}}),
	}
	own, err := g.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	wide := g
	wide.PackOver(QueueTableOf(all))
	b, err := wide.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, own) {
		t.Fatal("the wider table was not used")
	}
	var back Generation
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Assignment, back.Target, back.Handoffs.List()) != fmt.Sprint(g.Assignment, g.Target, g.Handoffs.List()) {
		t.Errorf("read back %v %v %v, want %v %v %v", back.Assignment, back.Target, back.Handoffs.List(), g.Assignment, g.Target, g.Handoffs.List())
	}
	narrow := g
	narrow.PackOver(QueueTableOf(all[:10])) // lacks b/7 and c/49
	if b, err := narrow.MarshalJSON(); err != nil || !bytes.Equal(b, own) {
		t.Errorf("over a table that lacks queues: %v\n%s\nwant\n%s", err, b, own)
	}
}

// A record whose lists are stretches of the table's aligned list (Span) is byte for byte the
// record of the same lists copied, which are looked up queue by queue.
func TestPackOverSpans(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []abi.Queue
	for _, b := range []string{"a", "b", "c"} {
		for id := range int32(300) { // steps of more than 63 slots take varints of two bytes
			all = append(all, abi.Queue{Topic: "T", BrokerName: b, QueueID: id})
		}
	}
	spans := Generation{Group: "g", Topic: "T", Number: 3, At: at,
		Assignment: map[string][]abi.Queue{"x": all[0:1:1], "y": all[1:400:400], "z": all[700:900:900], "w": all[400:401:401]},
		Target:     map[string][]abi.Queue{"x": all[0:1:1], "y": all[1:450:450], "z": all[700:900:900]},
		Handoffs:   HandoffsOf([]model.Handoff{{Queue: all[400], From: "w", To: "y", Since: at, Deadline: at.Add(time.Minute)}}),
	}
	copied := spans
	copied.Assignment, copied.Target = map[string][]abi.Queue{}, map[string][]abi.Queue{}
	for k, qs := range spans.Assignment {
		copied.Assignment[k] = slices.Clone(qs)
	}
	for k, qs := range spans.Target {
		copied.Target[k] = slices.Clone(qs)
	}
	aligned := QueueTableOf(all)
	if !aligned.Align(all) {
		t.Fatal("not aligned")
	}
	if _, ok := aligned.Span(spans.Assignment["y"]); !ok {
		t.Fatal("a stretch is no span")
	}
	spans.PackOver(aligned)
	copied.PackOver(QueueTableOf(all))
	got, err := spans.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want, err := copied.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("over spans\n%s\nlooked up\n%s", got, want)
	}
	var back Generation
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back.Assignment, back.Target) != fmt.Sprint(copied.Assignment, copied.Target) {
		t.Error("the spans' record reads back otherwise")
	}
}

// Keys offered in order make the same record as none, and keys that are not the assignment's
// in order (unsorted, one missing, one not assigned, repeated) are not trusted.
func TestKeysInOrder(t *testing.T) {
	qs := []abi.Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}, {Topic: "T", BrokerName: "b", QueueID: 0}}
	gens := []Generation{
		{Assignment: map[string][]abi.Queue{"x": qs[:1], "y": qs[1:2], "z": qs[2:]}},
		// Client ids and a target with the same keys: each map is checked as it is read.
		{Assignment: map[string][]abi.Queue{"x": qs[:1], "y": qs[1:2], "z": qs[2:]},
			CIDs:   map[string]string{"x": "cx", "y": "cy", "z": "cz"},
			Target: map[string][]abi.Queue{"x": qs[2:], "y": qs[:1], "z": qs[1:2]}},
		// A target with other keys, and client ids with a foreign one.
		{Assignment: map[string][]abi.Queue{"x": qs[:1], "y": qs[1:2], "z": qs[2:]},
			CIDs:   map[string]string{"x": "cx", "y": "cy", "w": "cw"},
			Target: map[string][]abi.Queue{"w": qs[:2], "z": qs[2:]}},
	}
	for n, g := range gens {
		g.Group, g.Topic, g.Number, g.At = "g", "T", 1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		want, err := g.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		for _, keys := range [][]string{{"x", "y", "z"}, {"y", "x", "z"}, {"x", "y"}, {"x", "y", "w"}, {"w", "x", "y"}, {"x", "x", "z"}, {"x", "y", "z", "zz"}} {
			h := g
			h.KeysInOrder(keys)
			got, err := h.MarshalJSON()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("generation %d, offered %q: %v\n%s\nwant\n%s", n, keys, err, got, want)
			}
		}
	}
}

// The time cache writes each time as appendJSONTime does, the same instant in another location
// or with a monotonic reading included.
func TestTimeCache(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)
	east := time.FixedZone("east", 3600)
	seq := []time.Time{at, at.Add(time.Minute), at, at.In(east), at.Add(time.Hour), at, at.Add(time.Minute), time.Now(), at.In(east)}
	var c timeCache
	for i, x := range seq {
		got, err := c.append([]byte("x"), x)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := appendJSONTime([]byte("x"), x)
		if !bytes.Equal(got, want) {
			t.Errorf("time %d: %s, want %s", i, got, want)
		}
	}
	if _, err := c.append(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("a time in the year 10000 was written")
	}
}
