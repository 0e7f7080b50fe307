package store_test

import (
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

func q(topic, broker string, id int32) abi.Queue {
	return abi.Queue{Topic: topic, BrokerName: broker, QueueID: id}
}

// packedGeneration has what makes packing hard: lists out of queue order, a queue in two
// members' lists (broadcasting), gaps in the ids, two topics, a target and handoffs.
func packedGeneration() store.Generation {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return store.Generation{
		Group: "g", Topic: "T", Number: 7, Inputs: "x", Plugin: "sticky", PluginVersion: "v", At: at,
		CIDs: map[string]string{"a": "a@1", "b": "b@2"},
		Assignment: map[string][]abi.Queue{
			"a": {q("T", "broker-b", 3), q("T", "broker-a", 0), q("T", "broker-a", 1), q("U", "broker-a", 9)},
			"b": {q("T", "broker-a", 1), q("T", "broker-b", 1000)},
			"c": {},
		},
		Target: map[string][]abi.Queue{
			"a": {q("T", "broker-a", 0)},
			"c": {q("T", "broker-b", 3), q("T", "broker-a", 5)},
		},
		Handoffs: store.HandoffsOf([]model.Handoff{
			{Queue: q("T", "broker-a", 5), From: "a", To: "c", Since: at, Deadline: at.Add(time.Minute)},
			{Queue: q("T", "broker-b", 3), From: "a", To: "c", Since: at, Deadline: at.Add(time.Minute)},
		}),
	}
}

// A generation reads back as it was written, and its record spells no queue out.
func TestPackedGenerationRoundTrip(t *testing.T) {
	for _, gen := range []store.Generation{packedGeneration(), {Group: "g", Topic: "T", Assignment: map[string][]abi.Queue{}}, {Group: "g", Topic: "T"}} {
		b, err := json.Marshal(gen)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "brokerName") {
			t.Errorf("record spells queues out: %s", b)
		}
		var got store.Generation
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, gen) {
			t.Errorf("read back\n%+v\nwant\n%+v\nfrom %s", got, gen, b)
		}
	}
}

// A record written before packing (queue lists spelled out) reads as it did.
func TestUnpackedGenerationRecord(t *testing.T) {
	old := `{"group":"g","topic":"T","number":3,"assignment":{"c1":[{"topic":"T","brokerName":"b","queueId":1}]},` +
		`"cids":{"c1":"c1"},"inputs":"x","at":"1970-01-01T00:01:40Z",` +
		`"target":{"c1":[{"topic":"T","brokerName":"b","queueId":1}],"c2":[{"topic":"T","brokerName":"b","queueId":2}]},` +
		`"handoffs":[{"queue":{"topic":"T","brokerName":"b","queueId":2},"from":"c1","to":"c2","since":"1970-01-01T00:01:40Z","deadline":"1970-01-01T00:02:40Z"}]}`
	var got store.Generation
	if err := json.Unmarshal([]byte(old), &got); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(100, 0).UTC()
	want := store.Generation{
		Group: "g", Topic: "T", Number: 3, Inputs: "x", At: at, CIDs: map[string]string{"c1": "c1"},
		Assignment: map[string][]abi.Queue{"c1": {q("T", "b", 1)}},
		Target:     map[string][]abi.Queue{"c1": {q("T", "b", 1)}, "c2": {q("T", "b", 2)}},
		Handoffs:   store.HandoffsOf([]model.Handoff{{Queue: q("T", "b", 2), From: "c1", To: "c2", Since: at, Deadline: at.Add(time.Minute)}}),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old record read as\n%+v\nwant\n%+v", got, want)
	}
}

// A damaged packed record is refused with an error that names what is wrong.
func TestDamagedPackedRecord(t *testing.T) {
	good, _ := json.Marshal(packedGeneration())
	for _, c := range []struct{ old, new, want string }{
		{`"format":"allocd-packed-1"`, `"format":"allocd-packed-9"`, "format"},
		{`"count":`, `"count":-`, "invalid"},
		{`"count":`, `"count":99999999`, "more than"},
		{`"first":5,"count":1`, `"first":5,"count":0`, "invalid"},
		{`"assignment":{"a":"`, `"assignment":{"a":"!!`, `member "a"`},
		{`"assignment":{"a":"`, `"assignment":{"a":"_w`, `member "a"`},
		{`"queues":"`, `"queues":"__`, "handoff"},
		{`"packed":{`, `"assignment":{},"packed":{`, "both"},
	} {
		bad := strings.Replace(string(good), c.old, c.new, 1)
		if bad == string(good) {
			t.Fatalf("%q is not in the record %s", c.old, good)
		}
		var g store.Generation
		if err := json.Unmarshal([]byte(bad), &g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", bad, err, c.want)
		}
	}
	// An index past the table: a member list stepping beyond the last queue.
	huge := strings.Replace(string(good), `"c":""`, `"c":"fw"`, 1) // varint 126 -> 63 steps
	var g store.Generation
	if err := json.Unmarshal([]byte(huge), &g); err == nil || !strings.Contains(err.Error(), "outside the table") {
		t.Errorf("index past the table: %v", err)
	}
}

// A large generation's record is small: about a byte or two per queue and a member key each.
func TestPackedRecordSize(t *testing.T) {
	gen := store.Generation{Group: "g", Topic: "T", Assignment: map[string][]abi.Queue{}}
	for m := range 1000 {
		var qs []abi.Queue
		for i := range 10 {
			qs = append(qs, q("T", fmt.Sprintf("broker-%03d", (m*10+i)/1000), int32((m*10+i)%1000)))
		}
		gen.Assignment[fmt.Sprintf("10.0.%d.%d@%d", m/256, m%256, 1000+m)] = qs
	}
	b, err := json.Marshal(gen)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 40*1000 {
		t.Errorf("10,000 queues of 1,000 members take %d bytes, want under 40 per member", len(b))
	}
}

func FuzzGenerationRecord(f *testing.F) {
	good, _ := json.Marshal(packedGeneration())
	f.Add(good)
	f.Add([]byte(`{"group":"g","topic":"T","packed":{"format":"allocd-packed-1","queues":[{"topic":"T","broker":"b","first":0,"count":3}],"assignment":{"a":"AgI"}}}`))
	f.Add([]byte(`{"group":"g","topic":"T","assignment":{"a":[{"topic":"T","brokerName":"b","queueId":1}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var g store.Generation
		if json.Unmarshal(b, &g) != nil {
			return
		}
		// What reads writes, and reads back the same.
		out, err := json.Marshal(g)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", g, err)
		}
		var again store.Generation
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("reading back %s: %v", out, err)
		}
		if !reflect.DeepEqual(normalize(g), normalize(again)) {
			t.Fatalf("read back\n%+v\nwant\n%+v", again, g)
		}
	})
}

// normalize drops what encoding does not keep apart: an empty Target or Handoffs is absent,
// and times keep their instant.
func normalize(g store.Generation) store.Generation {
	if len(g.Target) == 0 {
		g.Target = nil
	}
	hs := g.Handoffs.List()
	for i := range hs {
		hs[i].Since, hs[i].Deadline = hs[i].Since.UTC(), hs[i].Deadline.UTC()
	}
	g.Handoffs = store.HandoffsOf(hs)
	if len(g.CIDs) == 0 {
		g.CIDs = nil
	}
	g.At = g.At.UTC()
	return g
}
