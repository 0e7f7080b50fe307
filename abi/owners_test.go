package abi_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

func ownersRequest(nq int, consumers ...string) *abi.Request {
	r := &abi.Request{Group: "g", Consumers: consumers}
	for i := range nq {
		r.Queues = append(r.Queues, abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(i)})
	}
	return r
}

// TestOwnersResponseIsAppendOwners: owners written in place through OwnersResponse give the
// bytes AppendOwners gives, in a reused buffer with other bytes in it too.
func TestOwnersResponseIsAppendOwners(t *testing.T) {
	buf := []byte("leftover bytes from an earlier answer, longer than the next one")
	little := binary.NativeEndian.Uint16([]byte{1, 0}) == 1
	for _, owners := range [][]int32{{3, 0, abi.NoOwner, 0, 1}, {7}, make([]int32, 100), nil} {
		resp, in := abi.OwnersResponse(buf, len(owners))
		// Only where an int32 is stored as the wire stores it are the owners written in place.
		if inPlace := little && len(owners) > 0; (in != nil) != inPlace || len(in) != len(owners) && inPlace {
			t.Fatalf("%d owners: in place %d, want %v", len(owners), len(in), inPlace)
		}
		if in == nil {
			resp = abi.AppendOwners(resp[:0], owners)
		}
		copy(in, owners)
		if want := abi.AppendOwners(nil, owners); string(resp) != string(want) {
			t.Fatalf("owners %v: in place % x, AppendOwners % x", owners, resp, want)
		}
		buf = resp
	}
}

// TestOwnersFormResolves: an owner-form answer decodes, passes Validate and becomes the list-form
// answer, each consumer's queues in mqAll order; a repeated id gets the first one's list.
func TestOwnersFormResolves(t *testing.T) {
	req := ownersRequest(5, "a", "b", "b", "c")
	b := abi.AppendOwners(nil, []int32{3, 0, abi.NoOwner, 0, 1})
	var resp abi.Response
	if err := abi.DecodeResponse(b, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Owners == nil || len(resp.Results) != 0 {
		t.Fatalf("decoded %+v, want owners and no results before Validate", resp)
	}
	if err := abi.Validate(req, &resp); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{1, 3}, {4}, {4}, {0}}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(resp.Results), len(want))
	}
	for i, r := range resp.Results {
		if r.Failed || !slices.Equal(r.Indices, want[i]) {
			t.Errorf("consumer %d (%s): %v, want %v", i, req.Consumers[i], r.Indices, want[i])
		}
	}
	// An unsorted cidAll with a repeated id resolves by first occurrence too.
	req = ownersRequest(3, "z", "a", "z")
	got, err := abi.ResolveOwners(req, []int32{0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Results[0].Indices, []int{0, 2}) || !slices.Equal(got.Results[2].Indices, []int{0, 2}) ||
		!slices.Equal(got.Results[1].Indices, []int{1}) {
		t.Fatalf("unsorted cidAll: %+v", got.Results)
	}
	// No queues: every consumer gets an empty list.
	if err := abi.DecodeResponse(abi.AppendOwners(nil, nil), &resp); err != nil {
		t.Fatal(err)
	}
	if err := abi.Validate(ownersRequest(0, "a", "b"), &resp); err != nil || len(resp.Results) != 2 || len(resp.Results[0].Indices) != 0 {
		t.Fatalf("empty owner form: %v, %+v", err, resp)
	}
}

// TestOwnersFormRefused: each rule of ABI.md §5.4 refuses what breaks it, naming the problem.
func TestOwnersFormRefused(t *testing.T) {
	good := abi.AppendOwners(nil, []int32{0, 1})
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:len(good)-4], "header says"},
		{"count", func() []byte { b := slices.Clone(good); b[12] = 3; return b }(), "declares 3 queues"},
		{"major", func() []byte { b := slices.Clone(good); b[4] = 2; return b }(), "major version 2"},
		{"magic", func() []byte { b := slices.Clone(good); b[3] = 'X'; return b }(), "magic"},
	} {
		var r abi.Response
		err := abi.DecodeResponse(c.b, &r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	req := ownersRequest(2, "a", "a", "b")
	for _, c := range []struct {
		name   string
		req    *abi.Request
		owners []int32
		want   string
	}{
		{"targets", &abi.Request{Queues: req.Queues, Consumers: req.Consumers, Targets: []string{"a"}}, []int32{0, 0}, "targets"},
		{"too few", req, []int32{0}, "owners of 1 queues, the request has 2"},
		{"too many", req, []int32{0, 0, 0}, "owners of 3 queues"},
		{"out of range", req, []int32{0, 3}, "owner index 3 out of range [0,3)"},
		{"negative", req, []int32{-2, 0}, "owner index -2"},
		{"repeated id", req, []int32{1, 2}, `owner index 1 repeats consumer "a" (index 0)`},
	} {
		resp := &abi.Response{Owners: c.owners}
		err := abi.Validate(c.req, resp)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// FuzzValidateOwners: any bytes against a small request: DecodeResponse and Validate never panic,
// and what they accept as an owner-form answer gives each queue with an owner to exactly the
// results of that owner's id, in ascending order, and nobody else.
func FuzzValidateOwners(f *testing.F) {
	f.Add(abi.AppendOwners(nil, []int32{0, 1, 2, abi.NoOwner}), uint8(3), false)
	f.Add(abi.AppendOwners(nil, []int32{1, 1, 0, 0}), uint8(2), true)
	f.Add(abi.AppendOwners(nil, nil), uint8(0), false)
	f.Fuzz(func(t *testing.T, b []byte, nc uint8, repeat bool) {
		var consumers []string
		for i := range int(nc % 8) {
			consumers = append(consumers, fmt.Sprintf("c%d", i))
			if repeat && i%2 == 1 {
				consumers[i] = consumers[i-1]
			}
		}
		req := ownersRequest(4, consumers...)
		var resp abi.Response
		if abi.DecodeResponse(b, &resp) != nil || resp.Owners == nil {
			return
		}
		owners := slices.Clone(resp.Owners)
		// An Encoder's CheckOwners, for the request it encoded and for another one, agrees
		// with CheckOwners.
		var enc abi.Encoder
		if _, err := enc.EncodeCanonical(nil, req); err != nil {
			t.Fatal(err)
		}
		want := abi.CheckOwners(req, owners)
		if got := enc.CheckOwners(req, owners); (got == nil) != (want == nil) {
			t.Fatalf("Encoder.CheckOwners: %v, CheckOwners: %v", got, want)
		}
		other := ownersRequest(4, "c0", "c0", "c1")
		if got, want := enc.CheckOwners(other, owners), abi.CheckOwners(other, owners); (got == nil) != (want == nil) {
			t.Fatalf("Encoder.CheckOwners of a request it did not encode: %v, CheckOwners: %v", got, want)
		}
		// So does its CheckedOwnerLists, for both requests; what it accepts for the one it
		// encoded is every consumer's queues in queue order.
		flat, bounds, listErr := enc.CheckedOwnerLists(req, owners)
		if (listErr == nil) != (want == nil) {
			t.Fatalf("Encoder.CheckedOwnerLists: %v, CheckOwners: %v", listErr, want)
		}
		if _, _, err := enc.CheckedOwnerLists(other, owners); (err == nil) != (abi.CheckOwners(other, owners) == nil) {
			t.Fatalf("Encoder.CheckedOwnerLists of a request it did not encode: %v", err)
		}
		if listErr == nil {
			for i := range consumers {
				if got, want := flat[bounds[i]:bounds[i+1]], queuesOf(owners, i); !slices.Equal(got, want) {
					t.Fatalf("Encoder.CheckedOwnerLists gives consumer %d %v, want %v (owners %v)", i, got, want, owners)
				}
			}
		}
		// So does its Validate, which resolves the same lists.
		viaEnc := abi.Response{Owners: owners}
		encErr := enc.Validate(req, &viaEnc)
		otherErr := enc.Validate(other, &abi.Response{Owners: owners})
		if abi.Validate(other, &abi.Response{Owners: owners}) == nil != (otherErr == nil) {
			t.Fatalf("Encoder.Validate of a request it did not encode: %v", otherErr)
		}
		if abi.Validate(req, &resp) != nil {
			if encErr == nil {
				t.Fatal("Encoder.Validate accepts what Validate refuses")
			}
			return
		}
		if encErr != nil || !viaEnc.Equal(&resp) {
			t.Fatalf("Encoder.Validate: %v, %+v; Validate: %+v", encErr, viaEnc.Results, resp.Results)
		}
		if len(resp.Results) != len(consumers) {
			t.Fatalf("%d results for %d consumers", len(resp.Results), len(consumers))
		}
		for i, r := range resp.Results {
			if !slices.IsSorted(r.Indices) {
				t.Fatalf("consumer %d: %v not in mqAll order", i, r.Indices)
			}
			for _, q := range r.Indices {
				if o := owners[q]; o < 0 || consumers[o] != consumers[i] {
					t.Fatalf("queue %d (owner %d) in consumer %d's list", q, o, i)
				}
			}
		}
		for q, o := range owners {
			if o >= 0 && !slices.Contains(resp.Results[o].Indices, q) {
				t.Fatalf("queue %d missing from its owner %d's list", q, o)
			}
		}
	})
}

// TestResolveOwnersShapes holds ResolveOwners and CheckedOwnerLists to the definition (consumer k's
// list: the queues whose owner is k, ascending) on owners in blocks (AVG's shape, which resolves
// without the scatter pass), blocks with a queue nobody takes, round-robin and descending owners.
func TestResolveOwnersShapes(t *testing.T) {
	const nq, nc = 50, 7
	consumers := make([]string, nc)
	for i := range consumers {
		consumers[i] = fmt.Sprintf("c%d", i)
	}
	shapes := map[string]func(q int) int32{
		"blocks":          func(q int) int32 { return int32(q * nc / nq) },
		"blocks-unowned":  func(q int) int32 { return map[bool]int32{true: abi.NoOwner, false: int32(q * nc / nq)}[q == 20] },
		"round-robin":     func(q int) int32 { return int32(q % nc) },
		"descending":      func(q int) int32 { return int32((nq - 1 - q) * nc / nq) },
		"all-first":       func(int) int32 { return 0 },
		"blocks-not-last": func(q int) int32 { return int32(q * (nc - 1) / nq) },
	}
	for name, owner := range shapes {
		owners := make([]int32, nq)
		for q := range owners {
			owners[q] = owner(q)
		}
		resp, err := abi.ResolveOwners(ownersRequest(nq, consumers...), owners)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var e abi.Encoder
		flat, bounds, err := e.CheckedOwnerLists(ownersRequest(nq, consumers...), owners)
		if err != nil || len(bounds) != nc+1 {
			t.Fatalf("%s: CheckedOwnerLists: %d bounds, %v", name, len(bounds), err)
		}
		for k, r := range resp.Results {
			want := queuesOf(owners, k)
			if !slices.Equal(r.Indices, want) {
				t.Errorf("%s: consumer %d gets %v, want %v", name, k, r.Indices, want)
			}
			if list := flat[bounds[k]:bounds[k+1]]; !slices.Equal(list, want) {
				t.Errorf("%s: CheckedOwnerLists gives consumer %d %v, want %v", name, k, list, want)
			}
		}
	}
}

// CheckOwners and an Encoder's CheckedOwnerLists accept and refuse exactly what ResolveOwners
// does: owners out of range, an owner that repeats an earlier id, the wrong count, and a request
// with targets.
func TestCheckOwnersAgreesWithResolve(t *testing.T) {
	targeted := ownersRequest(2, "a", "b")
	targeted.Targets = []string{"a"}
	for i, c := range []struct {
		req    *abi.Request
		owners []int32
		ok     bool
	}{
		{ownersRequest(3, "a", "b"), []int32{0, 1, 0}, true},
		{ownersRequest(3, "a", "b"), []int32{abi.NoOwner, 1, 1}, true},
		{ownersRequest(3, "a", "a", "b"), []int32{0, 2, 0}, true},
		{ownersRequest(3, "a", "a", "b"), []int32{0, 1, 2}, false}, // index 1 repeats "a"
		{ownersRequest(3, "a", "b"), []int32{0, 2, 1}, false},
		{ownersRequest(3, "a", "b"), []int32{0, -2, 1}, false},
		{ownersRequest(3, "a", "b"), []int32{0, 1}, false},
		{targeted, []int32{0, 0}, false},
	} {
		_, rerr := abi.ResolveOwners(c.req, c.owners)
		cerr := abi.CheckOwners(c.req, c.owners)
		var e abi.Encoder
		_, _, lerr := e.CheckedOwnerLists(c.req, c.owners)
		if (cerr == nil) != c.ok || (rerr == nil) != c.ok || (lerr == nil) != c.ok {
			t.Errorf("case %d: CheckOwners %v, ResolveOwners %v, CheckedOwnerLists %v, want ok=%v", i, cerr, rerr, lerr, c.ok)
		}
	}
}

// The same agreement on longer answers, with one bad entry anywhere among valid ones (owners in
// no order, and in runs, which the grouping settles by their bounds) and the edge values of
// int32; CheckedOwnerLists refuses the same entry.
func TestCheckOwnersRefusesOneBadEntryAnywhere(t *testing.T) {
	req := ownersRequest(11, "a", "b", "c")
	// Owners in no order, and non-decreasing ones (resolved by their runs' bounds).
	for _, valid := range [][]int32{{0, 0, 1, abi.NoOwner, 1, 2, 2, 2, 0, 1, 2}, {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2}} {
		for at := range 11 {
			for _, bad := range []int32{3, 4, -2, 1<<31 - 1, -1 << 31} {
				owners := slices.Clone(valid)
				owners[at] = bad
				_, rerr := abi.ResolveOwners(req, owners)
				cerr := abi.CheckOwners(req, owners)
				if cerr == nil || rerr == nil || !strings.Contains(cerr.Error(), fmt.Sprintf("queue %d ", at)) ||
					!strings.Contains(rerr.Error(), fmt.Sprintf("queue %d ", at)) {
					t.Errorf("owner %d at %d of %v: CheckOwners %v, ResolveOwners %v", bad, at, valid, cerr, rerr)
				}
				var e abi.Encoder
				if _, _, lerr := e.CheckedOwnerLists(req, owners); lerr == nil || !strings.Contains(lerr.Error(), fmt.Sprintf("queue %d ", at)) {
					t.Errorf("owner %d at %d of %v: CheckedOwnerLists %v", bad, at, valid, lerr)
				}
			}
		}
	}
	if err := abi.CheckOwners(req, []int32{0, 0, 1, abi.NoOwner, 1, 2, 2, 2, 0, 1, 2}); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeResponseShared: an owner-form answer's Owners are the message's own memory when it is
// aligned (nothing copied: a change to the message shows), a copy when it is not, and decoding
// into a Response whose Owners are an earlier message's never writes into that message.
func TestDecodeResponseShared(t *testing.T) {
	b := abi.AppendOwners(nil, []int32{2, 0, abi.NoOwner, 1})
	var r abi.Response
	if err := abi.DecodeResponseShared(b, &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Owners, []int32{2, 0, abi.NoOwner, 1}) {
		t.Fatalf("owners %v", r.Owners)
	}
	b[len(b)-4] = 7 // the last owner, in the message itself
	if r.Owners[3] != 7 {
		t.Fatalf("owners %v were copied from an aligned message, want its own memory", r.Owners)
	}
	first := slices.Clone(b)
	odd := append(make([]byte, 1, 1+len(b)), abi.AppendOwners(nil, []int32{1, 1, 0, 0})...)[1:]
	if err := abi.DecodeResponseShared(odd, &r); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Owners, []int32{1, 1, 0, 0}) {
		t.Fatalf("owners %v from a misaligned message", r.Owners)
	}
	if !slices.Equal(b, first) {
		t.Fatalf("decoding a second message wrote into the first one's memory")
	}
	odd[len(odd)-4] = 9
	if r.Owners[3] != 0 {
		t.Fatalf("owners of a misaligned message are its memory, want a copy")
	}
	// An empty owner-form answer is still the owner form (Owners not nil).
	if err := abi.DecodeResponseShared(abi.AppendOwners(nil, nil), &r); err != nil || r.Owners == nil {
		t.Fatalf("empty owner form: owners %v, %v", r.Owners, err)
	}
}

// queuesOf is the definition of consumer index i's list in an owner-form answer: the queues whose
// owner is i, ascending (empty, not nil, for none).
func queuesOf(owners []int32, i int) []int {
	want := []int{}
	for q, o := range owners {
		if o == int32(i) {
			want = append(want, q)
		}
	}
	return want
}
