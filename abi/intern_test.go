package abi

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestEncoderStringsOnceAcrossForms: one Encoder, reused, writes every distinct string once and
// gives equal strings one id, whichever way intern finds them: compared one by one while the
// table is small (up to maxLinearStrings strings, none in the map), hashed once it grows or
// after the consumers, or among the consumers appended without the map. The strings come from
// a small pool, so group, topics, brokers, consumers, targets, config, labels and previous owners
// name one another's strings; tables run from one string to past the small form's size.
func TestEncoderStringsOnceAcrossForms(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var e Encoder
	for round := range 3000 {
		pool := make([]string, 1+r.IntN(14))
		for i := range pool {
			pool[i] = fmt.Sprintf("s%d", i)
		}
		pick := func() string { return pool[r.IntN(len(pool))] }
		req := &Request{Group: pick()}
		for range r.IntN(12) {
			req.Queues = append(req.Queues, Queue{Topic: pick(), BrokerName: pick(), QueueID: int32(r.IntN(4))})
		}
		for range r.IntN(10) {
			req.Consumers = append(req.Consumers, pick())
		}
		if r.IntN(3) == 0 {
			req.Targets = []string{pick()}
		}
		if r.IntN(3) == 0 {
			req.Config = map[string]string{pick(): pick()}
		}
		if r.IntN(4) == 0 {
			req.QueueAttrs = make([]Attrs, len(req.Queues))
			for i := range req.QueueAttrs {
				req.QueueAttrs[i].Labels = map[string]string{pick(): pick()}
			}
		}
		if r.IntN(3) == 0 {
			req.PrevOwners = make([]string, len(req.Queues))
			for i := range req.PrevOwners {
				if r.IntN(3) > 0 {
					req.PrevOwners[i] = pick()
				}
			}
		}
		encode := e.Encode
		if r.IntN(2) == 0 {
			encode = e.EncodeCanonical
		}
		b, err := encode(nil, req)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		v, err := ParseRequest(b)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		table := make([]string, v.nstr)
		for id := range table {
			table[id] = string(v.strBytes(uint32(id)))
		}
		if sorted := slices.Sorted(slices.Values(table)); len(slices.Compact(sorted)) != len(table) {
			t.Fatalf("round %d: a string is in the table twice: %q", round, table)
		}
		got, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !reflect.DeepEqual(got.Queues, req.Queues) && len(req.Queues) > 0 ||
			!slices.Equal(got.Consumers, req.Consumers) || got.Group != req.Group {
			t.Fatalf("round %d: decoded %+v, want %+v", round, got, req)
		}
	}
}
