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

// A table aligned with a list numbers the list's stretches by their place in it, and no other
// list: a copy of a stretch, or a list that only looks like one, is looked up queue by queue.
func TestQueueTableSpan(t *testing.T) {
	list := []abi.Queue{q("T", "a", 0), q("T", "a", 1), q("T", "b", 0), q("T", "b", 1), q("T", "b", 2)}
	tab := store.QueueTableOf(list)
	if _, ok := tab.Span(list); ok {
		t.Fatal("a table not yet aligned spans a list")
	}
	if tab.Align(slices.Clone(list[1:])) {
		t.Fatal("a list that is not the table's queues in order was aligned")
	}
	if tab.Align([]abi.Queue{list[1], list[0], list[2], list[3], list[4]}) {
		t.Fatal("a list out of slot order was aligned")
	}
	if !tab.Align(list) {
		t.Fatal("the table's queues in order were not aligned")
	}
	for lo := range len(list) {
		for hi := lo + 1; hi <= len(list); hi++ {
			first, ok := tab.Span(list[lo:hi:hi])
			if !ok || first != lo {
				t.Errorf("list[%d:%d] spans from %d (%v), want %d", lo, hi, first, ok, lo)
			}
			for k, x := range list[lo:hi] {
				if got := tab.Index(x); got != first+k {
					t.Errorf("list[%d:%d][%d] is in slot %d, Span says %d", lo, hi, k, got, first+k)
				}
			}
			if _, ok := tab.Span(slices.Clone(list[lo:hi])); ok {
				t.Errorf("a copy of list[%d:%d] spans", lo, hi)
			}
			for _, l := range [][]abi.Queue{list[lo:hi:hi], slices.Clone(list[lo:hi])} {
				got := tab.AppendSlots([]int32{7}, l)
				if len(got) != 1+len(l) || got[0] != 7 {
					t.Fatalf("AppendSlots of list[%d:%d] = %v", lo, hi, got)
				}
				for k, x := range l {
					if int(got[1+k]) != tab.Index(x) {
						t.Errorf("AppendSlots of list[%d:%d]: %v in slot %d, Index says %d", lo, hi, x, got[1+k], tab.Index(x))
					}
				}
			}
		}
	}
	if _, ok := tab.Span(nil); ok {
		t.Error("an empty list spans")
	}
	longer := append(slices.Clone(list), q("T", "c", 0))
	if _, ok := tab.Span(longer); ok {
		t.Error("a longer list spans")
	}
	if got := tab.AppendSlots(nil, longer); got[len(got)-1] != -1 {
		t.Errorf("a queue not in the table has slot %d", got[len(got)-1])
	}
	var one [1]abi.Queue
	one[0] = list[2]
	if _, ok := tab.Span(one[:]); ok {
		t.Error("a list elsewhere spans")
	}
}
