package store

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// HandoffsOf keeps a list as it is, in queue order: every field of every handoff reads back,
// times with their location (the same instant in another zone is another time, as a record
// writes it), and the handful of times is kept once.
func TestHandoffsKeepEveryField(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	paris := time.FixedZone("CET", 3600)
	q := func(b string, id int32) abi.Queue { return abi.Queue{Topic: "T", BrokerName: b, QueueID: id} }
	in := []model.Handoff{
		{Queue: q("b", 7), From: "x", To: "y", Since: at, Deadline: at.Add(time.Minute)},
		{Queue: q("a", 3), From: "y", To: "x", Since: at, Deadline: at.Add(time.Minute)},
		{Queue: q("b", 2), From: "x", To: "z", Since: at.In(paris), Deadline: at.Add(time.Minute)}, // the same instants elsewhere
		{Queue: q("a", 900), From: "x", To: "y", Since: at, Deadline: at.Add(time.Minute)},
	}
	hs := HandoffsOf(in)
	want := []model.Handoff{in[1], in[3], in[2], in[0]}
	if got := hs.List(); !reflect.DeepEqual(got, want) {
		t.Fatalf("List() = %v, want %v", got, want)
	}
	if len(hs.times) != 2 || len(hs.keys) != 3 {
		t.Errorf("%d times and %d keys kept, want 2 and 3", len(hs.times), len(hs.keys))
	}
	for i, h := range want {
		if hs.Queue(i) != h.Queue || hs.From(i) != h.From || hs.To(i) != h.To || hs.Since(i) != h.Since || hs.Deadline(i) != h.Deadline {
			t.Errorf("handoff %d reads %v %s %s %v %v, want %v", i, hs.Queue(i), hs.From(i), hs.To(i), hs.Since(i), hs.Deadline(i), h)
		}
		if n, ok := hs.Search(h.Queue); !ok || n != i {
			t.Errorf("Search(%v) = %d, %v; want %d, true", h.Queue, n, ok, i)
		}
	}
	for _, q := range []abi.Queue{q("a", 4), q("c", 3), {Topic: "U", BrokerName: "a", QueueID: 3}} {
		if n, ok := hs.Search(q); ok {
			t.Errorf("Search(%v) found handoff %d of a queue not handed off", q, n)
		}
	}
	for i, q := range hs.Queues() {
		if q != want[i].Queue {
			t.Errorf("Queues() yields %v for handoff %d, want %v", q, i, want[i].Queue)
		}
	}
	var none Handoffs
	if _, ok := none.Search(q("a", 3)); ok || none.Len() != 0 || none.List() != nil {
		t.Error("the zero Handoffs is not empty")
	}
}

// Handoffs over a topic's whole table, as a rebalance makes them, name a few queues of some of
// its brokers: walking them skips the brokers (and runs of them) with no handoff.
func TestHandoffsOverATable(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []abi.Queue
	for b := range 6 {
		for id := range int32(10) {
			all = append(all, abi.Queue{Topic: "T", BrokerName: fmt.Sprintf("broker-%d", b), QueueID: id})
		}
	}
	tab := QueueTableOf(all)
	keys := []string{"x", "y"}
	slots := []int{3, 9, 10, 41, 42, 59}
	hs := NewHandoffs(tab, keys, len(slots))
	for _, s := range slots {
		hs.Add(s, 0, 1, at, at.Add(time.Minute))
	}
	n := 0
	for i, q := range hs.Queues() {
		if q != all[slots[i]] || hs.Queue(i) != q || hs.SlotIn(tab, i) != slots[i] || hs.SlotIn(QueueTableOf(all[1:]), i) != slots[i]-1 {
			t.Errorf("handoff %d: %v (Queue %v, slot %d), want %v in slot %d", i, q, hs.Queue(i), hs.SlotIn(tab, i), all[slots[i]], slots[i])
		}
		n++
	}
	if n != len(slots) || len(hs.times) != 1 {
		t.Errorf("%d handoffs walked and %d times kept, want %d and 1", n, len(hs.times), len(slots))
	}
}

// Reading handoffs only reads their queue table: goroutines may read them while another looks
// queues up in the table (whose Index and Queue remember the last broker). Run with -race.
func TestHandoffsReadConcurrently(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []model.Handoff
	for b := range 4 {
		for id := range int32(50) {
			all = append(all, model.Handoff{Queue: abi.Queue{Topic: "T", BrokerName: string(rune('a' + b)), QueueID: id}, From: "x", To: "y", Since: at, Deadline: at})
		}
	}
	hs := HandoffsOf(all)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for i := range hs.Len() {
				if n, ok := hs.Search(all[i].Queue); !ok || hs.Queue(n) != all[i].Queue || hs.From(n) != all[i].From || hs.To(n) != all[i].To {
					t.Errorf("handoff %d read %v %s %s", i, hs.Queue(n), hs.From(n), hs.To(n))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range hs.table.Len() {
			hs.table.Index(hs.table.Queue(hs.table.Len() - 1 - i))
		}
	})
	wg.Wait()
}
