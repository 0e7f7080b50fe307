package abi_test

import (
	"bytes"
	"slices"
	"strings"
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
	v := mustParse(t, r)
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
	v = mustParse(t, r)
	v.PrevOwnerIndices(got)
	if !slices.Equal(got, []int32{-1, -1, -1, -1}) || v.HasPrevOwners() {
		t.Fatalf("without previous owners: %v", got)
	}
}

// Previous owners are written by string, whatever their storage: copies of a consumer's id,
// the id itself, and prefixes of one buffer (one address, other lengths) give the bytes that
// fresh copies of every string give.
func TestPrevOwnersByValue(t *testing.T) {
	buf := "member-1member-2"
	ids := []string{buf[:8], buf[8:], "member-3"}
	var qs []abi.Queue
	var shared, copies []string
	for i := range 300 {
		qs = append(qs, abi.Queue{Topic: "t", QueueID: int32(i)})
		var o string
		switch i % 5 {
		case 0, 1:
			o = ids[i%3] // the consumer's own string
		case 2:
			o = strings.Clone(ids[i%3])
		case 3:
			o = buf[:7] // "member-": the address of ids[0], another length
		case 4:
			o = ""
		}
		shared = append(shared, o)
		copies = append(copies, strings.Clone(o))
	}
	enc := func(prev []string) []byte {
		b, err := abi.EncodeRequest(nil, &abi.Request{Group: "g", Queues: qs, Consumers: ids, PrevOwners: prev})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got, want := enc(shared), enc(copies)
	if !bytes.Equal(got, want) {
		t.Fatal("previous owners encode differently by their storage")
	}
	v, err := abi.ParseRequest(got)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range shared {
		if p, ok := v.PrevOwner(i); ok != (o != "") || p != o {
			t.Fatalf("queue %d: previous owner %q, %v; want %q", i, p, ok, o)
		}
	}
}
