package abi_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
)

func q(topic, broker string, id int32) abi.Queue {
	return abi.Queue{Topic: topic, BrokerName: broker, QueueID: id}
}

func TestCompareQueues(t *testing.T) {
	// Each queue sorts before the next, as RocketMQ's MessageQueue.compareTo orders them.
	order := []abi.Queue{
		q("T", "broker-1", 0),
		q("T", "broker-10", 0), // byte-wise: "broker-10" < "broker-2"
		q("T", "broker-2", -1),
		q("T", "broker-2", 2),
		q("T", "broker-2", 10), // queue ids compare as numbers
		q("T", "broker-b", 0),  // upper case before lower case
		q("TopicTest", "a", 0),
		q("t", "a", 0),
	}
	for i := range order {
		for j := range order {
			got := abi.CompareQueues(order[i], order[j])
			if want := cmpInt(i, j); got != want {
				t.Errorf("CompareQueues(%v, %v) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCanonicalize(t *testing.T) {
	r := &abi.Request{
		Group:   "g",
		Targets: []string{"c2", "C1"},
		Queues: []abi.Queue{
			q("T", "broker-2", 10), q("T", "broker-2", 2), q("T", "broker-10", 1),
			q("T", "Broker-3", 0), q("A", "broker-2", 0), q("T", "broker-2", 2),
		},
		QueueAttrs: []abi.Attrs{
			{Metrics: map[string]int64{"n": 0}}, {Metrics: map[string]int64{"n": 1}}, {Metrics: map[string]int64{"n": 2}},
			{Metrics: map[string]int64{"n": 3}}, {Metrics: map[string]int64{"n": 4}}, {Metrics: map[string]int64{"n": 5}},
		},
		PrevOwners:    []string{"p0", "p1", "p2", "p3", "p4", "p5"},
		Consumers:     []string{"c2", "c10", "C1", "c1", "c10"},
		ConsumerAttrs: []abi.Attrs{{Labels: map[string]string{"n": "0"}}, {Labels: map[string]string{"n": "1"}}, {Labels: map[string]string{"n": "2"}}, {Labels: map[string]string{"n": "3"}}, {Labels: map[string]string{"n": "4"}}},
		Config:        map[string]string{"k": "v"},
	}
	before := *r
	saved := []any{slices.Clone(r.Queues), slices.Clone(r.QueueAttrs), slices.Clone(r.PrevOwners), slices.Clone(r.Consumers), slices.Clone(r.ConsumerAttrs), slices.Clone(r.Targets)}

	abi.Canonicalize(r)

	wantQueues := []abi.Queue{
		q("A", "broker-2", 0), q("T", "Broker-3", 0), q("T", "broker-10", 1),
		q("T", "broker-2", 2), q("T", "broker-2", 2), q("T", "broker-2", 10),
	}
	if !reflect.DeepEqual(r.Queues, wantQueues) {
		t.Errorf("queues %v\nwant %v", r.Queues, wantQueues)
	}
	// Attributes and previous owners follow their queues; equal queues keep their order.
	var ns []int64
	for _, a := range r.QueueAttrs {
		ns = append(ns, a.Metrics["n"])
	}
	if want := []int64{4, 3, 2, 1, 5, 0}; !slices.Equal(ns, want) {
		t.Errorf("queue attrs in order %v, want %v", ns, want)
	}
	if want := []string{"p4", "p3", "p2", "p1", "p5", "p0"}; !slices.Equal(r.PrevOwners, want) {
		t.Errorf("previous owners %v, want %v", r.PrevOwners, want)
	}
	if want := []string{"C1", "c1", "c10", "c10", "c2"}; !slices.Equal(r.Consumers, want) {
		t.Errorf("consumers %v, want %v (duplicates kept)", r.Consumers, want)
	}
	var cs []string
	for _, a := range r.ConsumerAttrs {
		cs = append(cs, a.Labels["n"])
	}
	if want := []string{"2", "3", "1", "4", "0"}; !slices.Equal(cs, want) {
		t.Errorf("consumer attrs in order %v, want %v", cs, want)
	}
	// Targets give the order of the results: they stay as they were, as does everything else.
	if !slices.Equal(r.Targets, []string{"c2", "C1"}) || r.Group != "g" || r.Config["k"] != "v" {
		t.Errorf("Canonicalize changed targets, group or config: %+v", r)
	}
	// The caller's slices are not modified.
	now := []any{before.Queues, before.QueueAttrs, before.PrevOwners, before.Consumers, before.ConsumerAttrs, before.Targets}
	if !reflect.DeepEqual(now, saved) {
		t.Errorf("Canonicalize modified the input slices")
	}
}

func TestCanonicalizeSortedIsKept(t *testing.T) {
	r := &abi.Request{Queues: queues("T", "b", 3), Consumers: []string{"a", "b"}}
	qs, cs := r.Queues, r.Consumers
	abi.Canonicalize(r)
	if &r.Queues[0] != &qs[0] || &r.Consumers[0] != &cs[0] {
		t.Errorf("sorted input was copied")
	}
	abi.Canonicalize(&abi.Request{}) // nothing to sort, nothing to break
}

// TestEncodeCanonical: EncodeCanonical writes what Canonicalize then Encode write, for requests
// in order, with queues out of order (within a broker, across brokers, across topics) and with
// consumers out of order, and leaves the request canonical.
func TestEncodeCanonical(t *testing.T) {
	for name, r := range map[string]*abi.Request{
		"sorted":                              {Group: "g", Queues: []abi.Queue{q("T", "b0", 0), q("T", "b0", 1), q("T", "b1", 0)}, Consumers: []string{"a", "b"}},
		"within broker":                       {Group: "g", Queues: []abi.Queue{q("T", "b0", 1), q("T", "b0", 0), q("T", "b1", 0)}, Consumers: []string{"a", "b"}},
		"across brokers":                      {Group: "g", Queues: []abi.Queue{q("T", "b1", 0), q("T", "b0", 5), q("T", "b0", 6)}, Consumers: []string{"a", "b"}},
		"across topics":                       {Group: "g", Queues: []abi.Queue{q("U", "b0", 0), q("T", "b0", 1)}, Consumers: []string{"a"}, PrevOwners: []string{"a", ""}},
		"consumers":                           {Group: "g", Queues: []abi.Queue{q("T", "b0", 0)}, Consumers: []string{"b", "a"}, ConsumerAttrs: []abi.Attrs{{Labels: map[string]string{"z": "1"}}, {}}},
		"duplicates":                          {Group: "g", Queues: []abi.Queue{q("T", "b0", 0), q("T", "b0", 0)}, Consumers: []string{"a", "a"}},
		"distinct ids that are other strings": {Group: "g", Queues: []abi.Queue{q("T", "b0", 0), q("T", "b1", 0)}, Consumers: []string{"T", "a", "b0", "b1", "g"}},
		"distinct, after unsorted queues":     {Group: "g", Queues: []abi.Queue{q("T", "b1", 0), q("T", "b0", 0)}, Consumers: []string{"a", "b0", "c"}},
	} {
		want := *r
		abi.Canonicalize(&want)
		wantBytes, err := abi.EncodeRequest([]byte("prefix"), &want)
		if err != nil {
			t.Fatal(err)
		}
		var e abi.Encoder
		got, err := e.EncodeCanonical([]byte("prefix"), r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantBytes) {
			t.Errorf("%s: EncodeCanonical differs from Canonicalize + Encode", name)
		}
		if !reflect.DeepEqual(r.Queues, want.Queues) || !reflect.DeepEqual(r.Consumers, want.Consumers) {
			t.Errorf("%s: request left as %v %v, want %v %v", name, r.Queues, r.Consumers, want.Queues, want.Consumers)
		}
	}
}
