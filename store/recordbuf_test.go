package store

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
)

// A commit's record buffers serve the next commit, and a batch's records never share one: two
// large generations written together and a third written after them read back as written.
func TestRecordBuffersReused(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gen := func(topic string, members int) Generation {
		g := Generation{Group: "g", Topic: topic, Number: int64(members), Inputs: "i", At: time.Unix(int64(members), 0).UTC(), Assignment: map[string][]abi.Queue{}}
		for m := range members {
			for id := range int32(20) {
				q := abi.Queue{Topic: topic, BrokerName: fmt.Sprintf("b%d", m), QueueID: id}
				g.Assignment[fmt.Sprintf("m%04d", m)] = append(g.Assignment[fmt.Sprintf("m%04d", m)], q)
			}
		}
		return g
	}
	a, b, c, d, e := gen("A", 300), gen("B", 200), gen("C", 100), gen("D", 90), gen("E", 80)
	if err := s.PutGenerations(a, b); err != nil {
		t.Fatal(err)
	}
	kept := s.records.free
	if err := s.PutGenerations(c); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGenerations(d, e); err != nil {
		t.Fatal(err)
	}
	gs, err := s.ListGenerations()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Generation{"A": a, "B": b, "C": c, "D": d, "E": e}
	if len(gs) != len(want) {
		t.Fatalf("%d generations read back, want %d", len(gs), len(want))
	}
	for _, g := range gs {
		if w := want[g.Topic]; !reflect.DeepEqual(g.Assignment, w.Assignment) || g.Number != w.Number {
			t.Errorf("generation %s read back with %d members, number %d; want %d, %d", g.Topic, len(g.Assignment), g.Number, len(w.Assignment), w.Number)
		}
	}
	if len(kept) != 2 || len(s.records.free) != 2 {
		t.Fatalf("%d and then %d record buffers kept, want 2 and 2", len(kept), len(s.records.free))
	}
	for i, buf := range s.records.free {
		if &buf[:1][0] != &kept[i][:1][0] {
			t.Errorf("buffer %d was not reused", i)
		}
	}
}
