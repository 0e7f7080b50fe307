package store_test

import (
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/store"
)

// A queue table numbers the distinct queues in canonical order, dense ids and sparse ones,
// one topic or several, and knows no other queue.
func TestQueueTable(t *testing.T) {
	for _, lists := range [][][]abi.Queue{
		{{q("T", "b", 2), q("T", "a", 1), q("T", "a", 0)}, {q("T", "a", 1), q("T", "b", 0)}},
		{{q("T", "b", 1<<30), q("T", "b", 3), q("U", "b", 3)}, {q("T", "a", 7), q("T", "b", 3), q("S", "z", 0)}},
	} {
		var want []abi.Queue
		for _, qs := range lists {
			want = append(want, qs...)
		}
		slices.SortFunc(want, abi.CompareQueues)
		want = slices.Compact(want)
		tab := store.QueueTableOf(lists...)
		if tab.Len() != len(want) {
			t.Fatalf("%d queues, want %d", tab.Len(), len(want))
		}
		for i, w := range want {
			if got := tab.Queue(i); got != w {
				t.Errorf("slot %d holds %v, want %v", i, got, w)
			}
			if got := tab.Index(w); got != i {
				t.Errorf("%v in slot %d, want %d", w, got, i)
			}
		}
		for _, absent := range []abi.Queue{q("T", "b", 4), q("T", "b", -1), q("V", "b", 3), q("T", "c", 0), q("U", "a", 1)} {
			if i := tab.Index(absent); i != -1 {
				t.Errorf("absent %v in slot %d", absent, i)
			}
		}
	}
}
