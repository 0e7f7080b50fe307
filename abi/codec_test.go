package abi_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

func TestVersion(t *testing.T) {
	if v := abi.Version(1, 0); v != 0x10000 {
		t.Errorf("Version(1, 0) = %#x", v)
	}
	if ma, mi := abi.SplitVersion(abi.Version(0xfffe, 0xffff)); ma != 0xfffe || mi != 0xffff {
		t.Errorf("SplitVersion = %d, %d", ma, mi)
	}
}

func TestQueueString(t *testing.T) {
	if got, want := q("TopicTest", "broker-a", 3).String(), "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestEncodeRefusesMismatchedLists(t *testing.T) {
	for name, r := range map[string]*abi.Request{
		"queue attributes":    {Queues: queues("T", "b", 2), QueueAttrs: []abi.Attrs{{}}},
		"consumer attributes": {Consumers: []string{"a"}, ConsumerAttrs: []abi.Attrs{{}, {}}},
		"previous owners":     {Queues: queues("T", "b", 2), PrevOwners: []string{"a", "b", "c"}},
	} {
		dst := []byte("keep")
		out, err := abi.EncodeRequest(dst, r)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v", name, err)
		}
		if string(out) != "keep" {
			t.Errorf("%s: a refused request changed dst to %q", name, out)
		}
	}
}

// Each distinct string is stored once, whatever its role, so readers may compare string ids.
func TestEncodeStoresStringsOnce(t *testing.T) {
	b, err := abi.EncodeRequest(nil, &abi.Request{
		Group:      "x",
		Queues:     []abi.Queue{q("x", "x", 0), q("x", "x", 1)},
		Consumers:  []string{"x", "x"},
		Targets:    []string{"x"},
		Config:     map[string]string{"x": "x"},
		PrevOwners: []string{"x", ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	off := rd32(b[dirOfBytes(b, abi.SectionStrings)+4:])
	if n := rd32(b[off:]); n != 1 {
		t.Errorf("string table holds %d strings, want 1", n)
	}
	if bytes.Count(b, []byte("x")) != 1 {
		t.Errorf("the string appears %d times in %x", bytes.Count(b, []byte("x")), b)
	}
}

func dirOfBytes(b []byte, kind uint32) int {
	for i := 0; i < int(rd32(b[12:])); i++ {
		if rd32(b[16+12*i:]) == kind {
			return 16 + 12*i
		}
	}
	return -1
}

// Every section starts 4-byte aligned relative to the message, wherever dst put it.
func TestEncodeAlignment(t *testing.T) {
	r := &abi.Request{Group: "abc", Queues: queues("T", "b", 1), Consumers: []string{"c"}, Config: map[string]string{"k": "vv"}}
	base, _ := abi.EncodeRequest(nil, r)
	if len(base)%4 != 0 {
		t.Errorf("request of %d bytes, not a multiple of 4", len(base))
	}
	for pre := range 4 {
		b, err := abi.EncodeRequest(bytes.Repeat([]byte{0xee}, pre), r)
		if err != nil || !bytes.Equal(b[pre:], base) {
			t.Errorf("after %d bytes the encoding differs: %v", pre, err)
		}
	}
}

// The zero ResponseWriter is an empty response ready to use: the plugin SDK relies on it.
func TestResponseWriterZeroValue(t *testing.T) {
	var w abi.ResponseWriter
	b := w.Bytes()
	var r abi.Response
	if err := abi.DecodeResponse(b, &r); err != nil || len(r.Results) != 0 {
		t.Fatalf("zero writer: %v, %+v", err, r)
	}

	var w2 abi.ResponseWriter
	w2.Begin()
	w2.Append(3)
	w2.Append(1)
	w2.Error("no")
	w2.Begin()
	want := abi.EncodeResponse(nil, &abi.Response{Results: []abi.Result{ok(3, 1), {Failed: true, Err: "no"}, ok()}})
	if got := w2.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("zero writer wrote %x, want %x", got, want)
	}

	var w3 abi.ResponseWriter
	w3.Error("first")
	w3.Indices([]int{0})
	want = abi.EncodeResponse(nil, &abi.Response{Results: []abi.Result{{Failed: true, Err: "first"}, ok(0)}})
	if got := w3.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("zero writer starting with Error wrote %x, want %x", got, want)
	}

	// Append extends the result Indices wrote, as it extends one Begin opened.
	var w4 abi.ResponseWriter
	w4.Indices([]int{4})
	w4.Append(5)
	w4.Indices(nil)
	want = abi.EncodeResponse(nil, &abi.Response{Results: []abi.Result{ok(4, 5), ok()}})
	if got := w4.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("Indices then Append wrote %x, want %x", got, want)
	}
}

func TestResponseWriterReuse(t *testing.T) {
	var w abi.ResponseWriter
	w.Indices([]int{1, 2, 3})
	first := w.Bytes()
	w.Reset(first[:0]) // reuse the storage
	w.Indices([]int{9})
	want := abi.EncodeResponse(nil, &abi.Response{Results: []abi.Result{ok(9)}})
	if got := w.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("reused writer wrote %x, want %x", got, want)
	}
	// EncodeResponse appends.
	if got := abi.EncodeResponse([]byte("ab"), &abi.Response{}); string(got[:2]) != "ab" || string(got[2:6]) != abi.ResponseMagic {
		t.Errorf("EncodeResponse did not append: %q", got)
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	good := abi.EncodeResponse(nil, &abi.Response{Results: []abi.Result{ok(1, 2), {Failed: true, Err: "abcde"}}})
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := map[string][]byte{
		"shorter than":   good[:12],
		"magic":          mod(func(b []byte) []byte { copy(b, "ALRQ"); return b }),
		"major version":  mod(func(b []byte) []byte { b[4] = 2; return b }),
		"header says":    good[:len(good)-4],
		"more than its":  mod(func(b []byte) []byte { le32(b[12:], 1000); return b }),
		"unknown status": mod(func(b []byte) []byte { le32(b[16:], 2); return b }),
		"declares 1000":  mod(func(b []byte) []byte { le32(b[20:], 1000); return b }),
		"-byte error":    mod(func(b []byte) []byte { le32(b[36:], 1000); return b }),
		"after its last": mod(func(b []byte) []byte { le32(b[12:], 1); return b }),
		"cut short": mod(func(b []byte) []byte {
			b = b[:32] // the header and the first result only, but two results declared
			le32(b[8:], 32)
			return b
		}),
	}
	for want, b := range tests {
		var r abi.Response
		err := abi.DecodeResponse(b, &r)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
	}
	// A later minor version decodes the same.
	later := bytes.Clone(good)
	later[6] = 3
	var r abi.Response
	if err := abi.DecodeResponse(later, &r); err != nil || len(r.Results) != 2 || r.Results[1].Err != "abcde" {
		t.Errorf("minor 3: %+v, %v", r, err)
	}
}

func TestResponseEqual(t *testing.T) {
	a := &abi.Response{Results: []abi.Result{ok(1), {Failed: true, Err: "x"}}}
	for _, b := range []*abi.Response{
		{Results: []abi.Result{ok(1)}},
		{Results: []abi.Result{ok(2), {Failed: true, Err: "x"}}},
		{Results: []abi.Result{ok(1, 2), {Failed: true, Err: "x"}}},
		{Results: []abi.Result{ok(1), {Failed: true, Err: "y"}}},
		{Results: []abi.Result{ok(1), ok()}},
	} {
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%+v equals %+v", a, b)
		}
	}
	if !a.Equal(&abi.Response{Results: []abi.Result{{Indices: []int{1}}, {Failed: true, Err: "x"}}}) {
		t.Errorf("equal responses differ")
	}
}

func TestRequestTargets(t *testing.T) {
	whole := &abi.Request{Consumers: []string{"a", "b"}}
	if whole.NumTargets() != 2 || whole.Target(1) != "b" {
		t.Errorf("whole group: %d targets, target 1 %q", whole.NumTargets(), whole.Target(1))
	}
	some := &abi.Request{Consumers: []string{"a", "b"}, Targets: []string{"z"}}
	if some.NumTargets() != 1 || some.Target(0) != "z" {
		t.Errorf("targets: %d, %q", some.NumTargets(), some.Target(0))
	}
	if (&abi.Request{Consumers: []string{"a"}, Targets: []string{}}).NumTargets() != 0 {
		t.Errorf("an empty target list asks for nothing")
	}
}

// The encoder's consumer path (sorted ids compared with their predecessor and the few strings
// before them, joining the map only when a later section interns) keeps the rule: no string twice
// in the table, and every request decodes to what was encoded.
func TestEncodeStoresConsumersOnce(t *testing.T) {
	many := queues("T", "b", 1)
	for i := range 9 { // more strings before the consumers than the linear search takes
		many = append(many, q("T", fmt.Sprintf("broker-%d", i), 0))
	}
	for _, r := range []*abi.Request{
		{Group: "g", Queues: queues("T", "b", 2), Consumers: []string{"a", "a", "b", "g"}},
		{Group: "g", Queues: queues("T", "b", 2), Consumers: []string{"T", "b", "c", "g"}, Targets: []string{"c", "g", "z"}},
		{Group: "g", Queues: queues("T", "b", 2), Consumers: []string{"b", "c"}, PrevOwners: []string{"c", "d"}},
		{Group: "g", Queues: queues("T", "b", 1), Consumers: []string{"c", "k"}, Config: map[string]string{"k": "c"}},
		{Group: "g", Queues: queues("T", "b", 1), Consumers: []string{"c", "b", "c"}}, // not sorted
		{Group: "g", Queues: many, Consumers: []string{"T", "broker-3", "c", "c"}, Targets: []string{"broker-3"}},
	} {
		b, err := abi.EncodeRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		off := rd32(b[dirOfBytes(b, abi.SectionStrings)+4:])
		n := rd32(b[off:])
		blob := b[off+4+4*(n+1):]
		seen := map[string]bool{}
		for i := range n {
			s := string(blob[rd32(b[off+4+4*i:]):rd32(b[off+8+4*i:])])
			if seen[s] {
				t.Errorf("%v: string %q is in the table twice", r.Consumers, s)
			}
			seen[s] = true
		}
		got, err := abi.DecodeRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Consumers, r.Consumers) || !slices.Equal(got.Targets, r.Targets) ||
			!slices.Equal(got.PrevOwners, r.PrevOwners) || !maps.Equal(got.Config, r.Config) {
			t.Errorf("%v: decodes to %+v", r.Consumers, got)
		}
		v, err := abi.ParseRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.NumTargets() {
			if want := slices.Index(r.Consumers, v.Target(i)); v.TargetIndex(i) != want {
				t.Errorf("%v: target %q has index %d, want %d", r.Consumers, v.Target(i), v.TargetIndex(i), want)
			}
		}
	}
}

// One Encoder writes every request exactly as a fresh one does, whatever it wrote before: the
// same request again (its QUEUES section reused), another group, the queues changed in place,
// equal names in other storage, fewer queues, and unsorted queues through EncodeCanonical.
func TestEncoderReuseIsFresh(t *testing.T) {
	base := func() *abi.Request {
		return &abi.Request{Group: "g", Queues: append(queues("T", "b0", 3), queues("T", "b1", 2)...), Consumers: []string{"c1", "c2"}}
	}
	r := base()
	same := *r
	otherGroup := *r
	otherGroup.Group = "T" // the topic's name: the ids of the queue strings move
	inPlace := base()
	moved := base()
	moved.Queues[4].BrokerName = strings.Clone("b1")
	fewer := base()
	fewer.Queues = fewer.Queues[:4]
	var e abi.Encoder
	for i, req := range []*abi.Request{r, &same, &otherGroup, r, inPlace, inPlace, moved, fewer, r} {
		if i == 5 {
			inPlace.Queues[1].QueueID = 7 // after an encoding of the same slice
		}
		got, err := e.Encode(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := abi.EncodeRequest(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d: the reused encoder wrote\n%x\nwant\n%x", i, got, want)
		}
	}
	unsorted := base()
	unsorted.Queues[0], unsorted.Queues[4] = unsorted.Queues[4], unsorted.Queues[0]
	for range 2 { // the second time from the cache, which must still report the order
		u := *unsorted
		got, err := e.EncodeCanonical(nil, &u)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := abi.EncodeRequest(nil, base())
		if !bytes.Equal(got, want) {
			t.Fatalf("unsorted queues through EncodeCanonical:\n%x\nwant\n%x", got, want)
		}
	}
}

// A request with QueuesFrozen is encoded as any other; the encoder keeps the frozen slice itself,
// so a later request with other queues must not write into it, and the frozen slice again, or
// an equal copy, is encoded as a fresh encoder writes it.
func TestEncoderFrozenQueues(t *testing.T) {
	frozen := append(queues("T", "b0", 3), queues("T", "b1", 2)...)
	keep := slices.Clone(frozen)
	other := queues("U", "b9", 4)
	var e abi.Encoder
	for i, req := range []*abi.Request{
		{Group: "g", Queues: frozen, Consumers: []string{"c1", "c2"}, QueuesFrozen: true},
		{Group: "g", Queues: frozen, Consumers: []string{"c1", "c3"}, QueuesFrozen: true},
		{Group: "g", Queues: other, Consumers: []string{"c1"}},
		{Group: "g", Queues: slices.Clone(other), Consumers: []string{"c2"}, QueuesFrozen: true},
		{Group: "g", Queues: frozen, Consumers: []string{"c4"}},
		{Group: "g", Queues: slices.Clone(keep), Consumers: []string{"c4"}, QueuesFrozen: true},
		{Group: "g", Queues: other, Consumers: []string{"c1"}},
	} {
		got, err := e.EncodeCanonical(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := abi.EncodeRequest(nil, req)
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d: the reused encoder wrote\n%x\nwant\n%x", i, got, want)
		}
		if !slices.Equal(frozen, keep) {
			t.Fatalf("request %d: the frozen queues were written: %v", i, frozen)
		}
	}
}

// Strings interned after sorted consumer ids (config, labels) that equal one of the ids get its
// id, both while the ids are looked up by binary search and once enough strings have moved them
// into the map.
func TestEncoderStringsAfterConsumers(t *testing.T) {
	cids := []string{"c0", "c1", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}
	for _, n := range []int{1, 3, 20} {
		r := &abi.Request{Group: "g", Queues: queues("T", "b0", 2), Consumers: cids, Config: map[string]string{}}
		for i := range n {
			r.Config[cids[i%len(cids)]] = cids[(i+3)%len(cids)] + "x"[:i%2]
		}
		var e abi.Encoder
		b, err := e.EncodeCanonical(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := abi.DecodeRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Consumers, cids) || !maps.Equal(got.Config, r.Config) {
			t.Fatalf("%d config entries: decoded %v %v, want %v %v", n, got.Consumers, got.Config, cids, r.Config)
		}
		// Every distinct string is in the table once: a config string equal to an id is the id.
		distinct := map[string]bool{"g": true, "T": true, "b0": true}
		for _, c := range cids {
			distinct[c] = true
		}
		for k, val := range r.Config {
			distinct[k], distinct[val] = true, true
		}
		if got := stringCount(t, b); got != len(distinct) {
			t.Fatalf("%d config entries: %d strings in the table, want %d", n, got, len(distinct))
		}
	}
}

// stringCount reads the count of an encoded request's STRINGS section from its directory.
func stringCount(t *testing.T, b []byte) int {
	le := binary.LittleEndian
	for i := range int(le.Uint32(b[12:])) {
		d := b[16+12*i:]
		if le.Uint32(d) == abi.SectionStrings {
			return int(le.Uint32(b[le.Uint32(d[4:]):]))
		}
	}
	t.Fatal("no STRINGS section")
	return 0
}

// One Encoder writes every request exactly as a fresh one does while it reuses the last consumer
// list's section (the same ids after the same string table): for the same list again, a list
// changed in place, the same list after another group, other queues, a topic equal to an id or
// the same table bytes split into other strings,
// repeated ids, strings after the ids that equal one (config, targets, labels), and through
// EncodeCanonical, whose order check the reuse spares, unsorted ids and CheckOwners' view of
// repeated ones.
func TestEncoderReusedConsumersAreFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	lists := [][]string{
		{"c0", "c1", "c2", "c3"},
		{"c0", "c1", "c1", "c3"},
		{"T", "c1", "g"}, // ids equal to the topic and the group
		{"c3", "c0", "c2"},
		{"c0"},
		{},
	}
	shared := slices.Clone(lists[0]) // one slice, changed in place between encodings
	queueSets := [][]abi.Queue{queues("T", "b0", 3), append(queues("T", "b0", 2), queues("T", "b1", 2)...), queues("c1", "b0", 2)}
	var e abi.Encoder
	// The same table bytes split into other strings: "g" "Tx" "b0", then "gT" "x" "b0", where
	// the id "x" is the topic's.
	xs := []string{"x"}
	for i, r := range []*abi.Request{
		{Group: "g", Queues: queues("Tx", "b0", 1), Consumers: xs},
		{Group: "gT", Queues: queues("x", "b0", 1), Consumers: xs},
	} {
		got, _ := e.Encode(nil, r)
		if want, _ := abi.EncodeRequest(nil, r); !bytes.Equal(got, want) {
			t.Fatalf("table split %d: the reused encoder wrote\n%x\nwant\n%x", i, got, want)
		}
	}
	for step := range 3000 {
		var cids []string
		switch k := rng.IntN(len(lists) + 2); {
		case k < len(lists):
			cids = lists[k]
		case k == len(lists):
			if rng.IntN(3) == 0 {
				shared[rng.IntN(len(shared))] = fmt.Sprintf("c%d", rng.IntN(5))
			}
			cids = shared
		default:
			cids = make([]string, len(lists[0])) // the same ids in other storage
			for i, s := range lists[0] {
				cids[i] = strings.Clone(s)
			}
		}
		r := &abi.Request{Group: []string{"g", "h"}[rng.IntN(2)], Queues: queueSets[rng.IntN(len(queueSets))], Consumers: cids}
		switch rng.IntN(4) {
		case 1:
			r.Config = map[string]string{"c1": "c2", "k": "T"}
		case 2:
			if len(cids) > 0 {
				r.Targets = []string{cids[len(cids)-1]}
			}
		case 3:
			r.ConsumerAttrs = make([]abi.Attrs, len(cids))
			for i := range cids {
				r.ConsumerAttrs[i].Labels = map[string]string{"zone": cids[0]}
			}
		}
		canonical := rng.IntN(2) == 0
		var got []byte
		var err error
		if canonical {
			c := *r
			got, err = e.EncodeCanonical(nil, &c)
			abi.Canonicalize(r)
		} else {
			got, err = e.Encode(nil, r)
		}
		if err != nil {
			t.Fatal(err)
		}
		want, err := abi.EncodeRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d (%v, canonical %v): the reused encoder wrote\n%x\nwant\n%x", step, r.Consumers, canonical, got, want)
		}
		if canonical && r.Targets == nil {
			// An owner naming a later copy of a repeated id is refused, as abi.CheckOwners does.
			owners := make([]int32, len(r.Queues))
			for q := range owners {
				owners[q] = int32(q % max(1, len(r.Consumers)))
				if len(r.Consumers) == 0 {
					owners[q] = abi.NoOwner
				}
			}
			if (e.CheckOwners(r, owners) == nil) != (abi.CheckOwners(r, owners) == nil) {
				t.Fatalf("step %d (%v): Encoder.CheckOwners %v, CheckOwners %v", step, r.Consumers, e.CheckOwners(r, owners), abi.CheckOwners(r, owners))
			}
		}
	}
}
