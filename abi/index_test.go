package abi_test

import (
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
)

// Indices by string id name each id's first occurrence in cidAll, and -1 for a queue with no
// previous owner or one that has left.
func TestIndicesByStringID(t *testing.T) {
	r := &abi.Request{
		Group:      "g",
		Queues:     []abi.Queue{{Topic: "t", QueueID: 0}, {Topic: "t", QueueID: 1}, {Topic: "t", QueueID: 2}, {Topic: "t", QueueID: 3}},
		Consumers:  []string{"a", "b", "b", "c"},
		PrevOwners: []string{"b", "", "gone", "c"},
	}
	b, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	v, err := abi.ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	var first []int
	for j := range v.NumConsumers() {
		first = append(first, v.ConsumerFirstIndex(j))
	}
	if !slices.Equal(first, []int{0, 1, 1, 3}) {
		t.Fatalf("ConsumerFirstIndex %v", first)
	}
	want := []int32{1, -1, -1, 3}
	got := make([]int32, v.NumQueues())
	v.PrevOwnerIndices(got)
	if !slices.Equal(got, want) {
		t.Fatalf("PrevOwnerIndices %v, want %v", got, want)
	}
	for i, w := range want {
		if v.PrevOwnerIndex(i) != int(w) {
			t.Fatalf("PrevOwnerIndex(%d) = %d, want %d", i, v.PrevOwnerIndex(i), w)
		}
	}
	r.PrevOwners = nil
	if b, err = abi.EncodeRequest(nil, r); err != nil {
		t.Fatal(err)
	}
	if v, err = abi.ParseRequest(b); err != nil {
		t.Fatal(err)
	}
	v.PrevOwnerIndices(got)
	if !slices.Equal(got, []int32{-1, -1, -1, -1}) || v.HasPrevOwners() {
		t.Fatalf("without previous owners: %v", got)
	}
}
