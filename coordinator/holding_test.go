package coordinator

import (
	"fmt"
	"testing"

	"github.com/allocd/allocd/abi"
)

// A member that never confirms is told a new list every generation: its holding keeps a bounded
// number of lists and still answers for every queue it was told, each counted once.
func TestHoldingBounded(t *testing.T) {
	var h holding
	told := map[abi.Queue]bool{}
	for gen := range 100 {
		var qs []abi.Queue
		for k := range 3 {
			q := abi.Queue{Topic: "T", BrokerName: fmt.Sprintf("b%d", (gen+k)%7), QueueID: int32((gen * k) % 11)}
			qs = append(qs, q)
			told[q] = true
		}
		h.add(qs)
		h.add(qs) // the same list again (an unchanged member's) is not kept twice
		if gen%10 == 0 {
			q := abi.Queue{Topic: "T", BrokerName: "held", QueueID: int32(gen)}
			h.addOne(q)
			told[q] = true
		}
		if len(h.lists) > maxHoldingLists {
			t.Fatalf("generation %d: %d lists kept, bound %d", gen, len(h.lists), maxHoldingLists)
		}
	}
	for q := range told {
		if !h.has(q) {
			t.Errorf("%v was told but is not held", q)
		}
	}
	if h.has(abi.Queue{Topic: "T", BrokerName: "b0", QueueID: 99}) {
		t.Error("a queue never told is held")
	}
	if n := len(h.distinctSet()); n != len(told) {
		t.Errorf("%d distinct queues held, %d told", n, len(told))
	}
	var empty *holding
	if empty.has(abi.Queue{}) || empty.queues() != 0 {
		t.Error("no holding holds something")
	}
	// A holding is within another when the other has each of its queues, in whatever lists.
	a := []abi.Queue{{Topic: "T", BrokerName: "x", QueueID: 1}, {Topic: "T", BrokerName: "x", QueueID: 2}}
	small, big := &holding{}, &holding{}
	small.add(a[:1])
	big.add(a)
	if !small.within(big) || big.within(small) || !big.within(big) {
		t.Errorf("within: %v %v %v, want true false true", small.within(big), big.within(small), big.within(big))
	}
}
