package strategy

import (
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
)

// sameQueues accepts only a list queue by queue equal to the last one, with nothing the last
// one's requests did not carry.
func TestSameQueues(t *testing.T) {
	last := []abi.Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	same := func() []Queue {
		return []Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	}
	if !sameQueues(same(), last) {
		t.Fatal("an equal list is not the same")
	}
	for name, change := range map[string]func(qs []Queue) []Queue{
		"shorter":    func(qs []Queue) []Queue { return qs[:1] },
		"topic":      func(qs []Queue) []Queue { qs[1].Topic = "U"; return qs },
		"broker":     func(qs []Queue) []Queue { qs[1].BrokerName = "b"; return qs },
		"queue id":   func(qs []Queue) []Queue { qs[1].QueueID = 2; return qs },
		"labels":     func(qs []Queue) []Queue { qs[0].Labels = map[string]string{"zone": "z"}; return qs },
		"metrics":    func(qs []Queue) []Queue { qs[0].Metrics = map[string]int64{"lag": 1}; return qs },
		"prev owner": func(qs []Queue) []Queue { qs[1].PrevOwner = "c1"; return qs },
	} {
		if sameQueues(change(same()), last) {
			t.Errorf("%s changed: still the same list", name)
		}
	}
}

// sameMemory accepts only the very queues the copy was taken of: any field changed since (a name
// replaced, an id, a map set, a previous owner) makes it compare field by field.
func TestSameMemory(t *testing.T) {
	same := []Queue{{Topic: "T", BrokerName: "a", QueueID: 0}, {Topic: "T", BrokerName: "a", QueueID: 1}}
	given := slices.Clone(same)
	if !sameMemory(same, given) {
		t.Fatal("the queues the copy was taken of are not the same")
	}
	for name, change := range map[string]func(qs []Queue) []Queue{
		"none":       func(qs []Queue) []Queue { return qs[:0] },
		"shorter":    func(qs []Queue) []Queue { return qs[:1] },
		"topic":      func(qs []Queue) []Queue { qs[1].Topic = "U"; return qs },
		"broker":     func(qs []Queue) []Queue { qs[1].BrokerName = "b"; return qs },
		"queue id":   func(qs []Queue) []Queue { qs[1].QueueID = 2; return qs },
		"labels":     func(qs []Queue) []Queue { qs[0].Labels = map[string]string{}; return qs },
		"metrics":    func(qs []Queue) []Queue { qs[0].Metrics = map[string]int64{}; return qs },
		"prev owner": func(qs []Queue) []Queue { qs[1].PrevOwner = "c1"; return qs },
	} {
		if sameMemory(change(slices.Clone(same)), given) {
			t.Errorf("%s changed: still the same memory", name)
		}
	}
}

// A queue's empty map filled in place after a call reaches the plugin with the next one: the
// last list is not reused for queues that had maps, whose contents their memory does not show.
func TestRequestSeesAMapFilledInPlace(t *testing.T) {
	var s Strategy
	g := &Group{Name: "g", Consumers: []Consumer{{ID: "c"}}, Queues: []Queue{
		{Topic: "T", BrokerName: "a", QueueID: 0, Labels: map[string]string{}}, {Topic: "T", BrokerName: "a", QueueID: 1},
	}}
	if req, _, _ := s.request(g); req.QueueAttrs != nil {
		t.Fatalf("empty labels gave attributes: %v", req.QueueAttrs)
	}
	g.Queues[0].Labels["zone"] = "z"
	if req, _, _ := s.request(g); req.QueueAttrs == nil {
		t.Fatal("labels filled in place did not reach the request")
	}
	// Queues without maps: the same queues reuse the list sent, found by their memory.
	var fresh Strategy
	g.Queues[0].Labels = nil
	first, _, _ := fresh.request(g)
	again, _, _ := fresh.request(g)
	if &again.Queues[0] != &first.Queues[0] || !sameMemory(g.Queues, fresh.queues.Load().given) {
		t.Fatal("the same queues did not reuse the list sent")
	}
}
