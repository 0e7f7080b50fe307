package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
)

// viaJSON is what encoding/json, with decode's rules, reads from body.
func viaJSON(body []byte) (coordinator.Heartbeat, error) {
	var hb coordinator.Heartbeat
	err := decodeBody(body, &hb)
	return hb, err
}

// FuzzFastHeartbeat: whatever body the fast reader accepts, encoding/json accepts too and reads
// as the same Heartbeat (nil and empty maps and slices told apart).
func FuzzFastHeartbeat(f *testing.F) {
	for _, s := range []string{
		`{"cid":"10.0.0.7@1234","topics":["T"],"instanceId":"","labels":{},"generations":{"T":2}}`,
		`{"cid":"c","labels":{"weight":"3","zone":"a"},"instanceId":"pod-1","confirms":true}`,
		` { "cid" : "c" , "topics" : [ ] , "labels" : null , "generations" : { "T" : -0 , "U" : 123456789012345678 } } `,
		`{"cid":"c","generations":{"T":1e3}}`,
		`{"cid":"c","generations":{"T":01}}`,
		`{"cid":"c","CID":"d"}`,
		`{"cid":"c","cid":"d"}`,
		`{"cid":"c","labels":{"a":"1","a":"2"}}`,
		`{"cid":"\u0041"}`,
		`{"cid":"c","confirms":null,"instanceId":null,"topics":null}`,
		`{"cid":"c","offsets":{"T":[]}}`,
		`{"cid":"c"} {}`,
		`{}`,
		`{"cid":"c",}`,
		`{"cid":"é","labels":{"zone":"ü"}}`,
	} {
		f.Add([]byte(s))
	}
	// What the Go client writes.
	b, err := json.Marshal(client.Heartbeat{CID: "10.0.0.1@7", Topics: []string{"T", "U"}, InstanceID: "pod-7",
		Labels: map[string]string{"zone": "a"}, Generations: map[string]int64{"T": 12}, Confirms: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkUTF8(body) != nil {
			return // readBody refuses it before either reader
		}
		got, ok := fastHeartbeat(body)
		if !ok {
			return
		}
		want, err := viaJSON(body)
		if err != nil {
			t.Fatalf("fast reader accepted %q, encoding/json refuses it: %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast reader %#v, encoding/json %#v", body, got, want)
		}
	})
}

// The fast reader takes what clients send, and leaves the rest to encoding/json: the bodies a
// heartbeat is made of in practice must not fall back, or the fast path is dead code.
func TestFastHeartbeatTakesClientBodies(t *testing.T) {
	for _, hb := range []client.Heartbeat{
		{CID: "10.0.0.1@7", Topics: []string{"T"}, Confirms: true},
		{CID: "10.0.0.1@7", Topics: []string{"T", "U"}, InstanceID: "pod-7", Labels: map[string]string{"zone": "a", "weight": "2"},
			Generations: map[string]int64{"T": 12, "U": -1}, Confirms: true},
	} {
		b, err := json.Marshal(hb)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := fastHeartbeat(b)
		if !ok {
			t.Fatalf("fell back on %s", b)
		}
		if want, err := viaJSON(b); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: fast %#v, encoding/json %#v (%v)", b, got, want, err)
		}
	}
	for _, b := range []string{`{"cid":"c","offsets":{}}`, `{"cid":"\u0063"}`, `{"Cid":"c"}`, `{"cid":"c","cid":"c"}`} {
		if _, ok := fastHeartbeat([]byte(b)); ok {
			t.Fatalf("took %s, which only encoding/json reads right", b)
		}
	}
	// The fallback still answers what encoding/json answers.
	hb, err := decodeHeartbeat(bytes.NewReader([]byte(`{"Cid":"c","topics":["T"]}`)))
	if err != nil || hb.CID != "c" {
		t.Fatalf("fallback: %#v, %v", hb, err)
	}
}

// BenchmarkDecodeHeartbeat: a client's heartbeat body through decodeHeartbeat (the fast reader)
// and through encoding/json alone.
func BenchmarkDecodeHeartbeat(b *testing.B) {
	body, err := json.Marshal(client.Heartbeat{CID: "10.0.3.17@4021", Topics: []string{"T"}, InstanceID: "pod-17",
		Labels: map[string]string{"zone": "a"}, Generations: map[string]int64{"T": 12}, Confirms: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeHeartbeat(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := viaJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// clientBatch is the body of POST /v1/heartbeats as the Go client writes it.
func clientBatch(t testing.TB, groups []string, hbs []client.Heartbeat) []byte {
	type item struct {
		Group     string           `json:"group"`
		Heartbeat client.Heartbeat `json:"heartbeat"`
	}
	var req struct {
		Heartbeats []item `json:"heartbeats"`
	}
	req.Heartbeats = []item{}
	for i := range groups {
		req.Heartbeats = append(req.Heartbeats, item{groups[i], hbs[i]})
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// For every batch the fast reader accepts, encoding/json reads the same groups and heartbeats.
func FuzzFastBatch(f *testing.F) {
	f.Add(clientBatch(f, []string{"g", "h"}, []client.Heartbeat{{CID: "c1", Topics: []string{"T"}, Confirms: true},
		{CID: "c2", Topics: []string{}, Labels: map[string]string{"zone": "a"}, Generations: map[string]int64{"T": 3}}}))
	for _, s := range []string{
		`{"heartbeats":[]}`, `{"heartbeats":[{"group":"g","heartbeat":{}}]}`, ` { "heartbeats" : [ { "group" : "g" , "heartbeat" : { "cid" : "c" } } ] } `,
		`{"heartbeats":[{"heartbeat":{},"group":"g"}]}`, `{"heartbeats":[{"group":"g","heartbeat":{"cid":"c"}}],"x":1}`,
		`{"heartbeats":[{"group":"g","heartbeat":{"cid":"c"}}]}x`, `{"heartbeats":[{"group":"g","heartbeat":{"cid":"c","cid":"d"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if checkUTF8(body) != nil {
			return
		}
		groups, hbs, ok := fastBatch(body)
		if !ok {
			return
		}
		var req heartbeatBatch
		if err := decodeBody(body, &req); err != nil {
			t.Fatalf("fast reader accepted %q, encoding/json refuses it: %v", body, err)
		}
		if len(req.Heartbeats) != len(groups) || len(hbs) != len(groups) {
			t.Fatalf("%q: fast reader %d heartbeats, encoding/json %d", body, len(groups), len(req.Heartbeats))
		}
		for i, item := range req.Heartbeats {
			want, err := viaJSON(item.Heartbeat)
			if err != nil || item.Group != groups[i] || !reflect.DeepEqual(hbs[i], want) {
				t.Fatalf("%q item %d: fast reader %q %#v, encoding/json %q %#v (%v)", body, i, groups[i], hbs[i], item.Group, want, err)
			}
		}
	})
}

// The Go client's batches take the fast reader.
func TestFastBatchTakesClientBodies(t *testing.T) {
	b := clientBatch(t, []string{"g", "g-2"}, []client.Heartbeat{{CID: "10.0.0.1@7", Topics: []string{"T"}, Confirms: true},
		{CID: "10.0.0.2@7", Topics: []string{"T", "U"}, InstanceID: "pod-7", Generations: map[string]int64{"T": 12}}})
	groups, hbs, ok := fastBatch(b)
	if !ok || len(groups) != 2 || groups[1] != "g-2" || hbs[1].InstanceID != "pod-7" || hbs[1].Generations["T"] != 12 {
		t.Fatalf("%s: %v %#v %v", b, groups, hbs, ok)
	}
	if _, _, ok := fastBatch(clientBatch(t, nil, nil)); !ok {
		t.Fatal("fell back on an empty batch")
	}
}
