package strategy

import (
	"fmt"
	"math/rand/v2"
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
	ids := []Consumer{{ID: "a"}, {ID: "b"}}
	for name, change := range map[string]func(cs []Consumer){
		"id":      func(cs []Consumer) { cs[1].ID = "c" },
		"labels":  func(cs []Consumer) { cs[0].Labels = map[string]string{} },
		"metrics": func(cs []Consumer) { cs[1].Metrics = map[string]int64{} },
	} {
		changed := slices.Clone(ids)
		change(changed)
		if !sameMemory(ids, slices.Clone(ids)) || sameMemory(changed, ids) {
			t.Errorf("consumers, %s changed: still the same memory", name)
		}
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

// The same consumers again get the id list and permutation sent last, found by their memory;
// consumers with maps, even empty ones, are never kept (a map filled in place would not show).
func TestRequestReusesConsumers(t *testing.T) {
	var s Strategy
	g := &Group{Name: "g", Queues: []Queue{{Topic: "T", BrokerName: "a"}},
		Consumers: []Consumer{{ID: "c2"}, {ID: "c0"}, {ID: "c1"}}}
	first, _, perm := s.request(g)
	again, _, perm2 := s.request(g)
	if &again.Consumers[0] != &first.Consumers[0] || &perm2[0] != &perm[0] || !slices.Equal(perm, []int{1, 2, 0}) {
		t.Fatalf("the same consumers: lists %p and %p, permutations %v and %v", first.Consumers, again.Consumers, perm, perm2)
	}
	g.Consumers[1].ID = "c3"
	if moved, _, perm3 := s.request(g); !slices.Equal(moved.Consumers, []string{"c1", "c2", "c3"}) || !slices.Equal(perm3, []int{2, 0, 1}) {
		t.Fatalf("an id replaced in place: %v, %v", moved.Consumers, perm3)
	}
	g.Consumers[0].Metrics = map[string]int64{}
	withMap, _, _ := s.request(g)
	g.Consumers[0].Metrics["weight"] = 2
	if filled, _, _ := s.request(g); &filled.Consumers[0] == &withMap.Consumers[0] || filled.ConsumerAttrs == nil {
		t.Fatalf("a map filled in place: the list sent before reused (attributes %v)", filled.ConsumerAttrs)
	}
}

// fromOwners gives each consumer, named by the caller's index, the list the host's list form
// gives it (abi.ResolveOwners), its queues named by the caller's indices: on canonical requests
// with repeated consumer ids (their later occurrences share the first's list), queues that no
// consumer owns, and the caller's lists in another order (qperm, cperm) or already canonical.
func TestFromOwnersIsTheListForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 500 {
		nq, nc := rng.IntN(40), 1+rng.IntN(10)
		req := &abi.Request{Group: "g"}
		for q := range nq {
			req.Queues = append(req.Queues, abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(q)})
		}
		for range nc {
			req.Consumers = append(req.Consumers, fmt.Sprintf("c%d", rng.IntN(6)))
		}
		slices.Sort(req.Consumers)
		owners := make([]int32, nq)
		for q := range owners {
			i := rng.IntN(nc + 1)
			if i == nc {
				owners[q] = abi.NoOwner
				continue
			}
			for i > 0 && req.Consumers[i-1] == req.Consumers[i] {
				i-- // the first of its id: the host refuses any other
			}
			owners[q] = int32(i)
		}
		want, err := abi.ResolveOwners(req, owners)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		var qperm, cperm []int
		if trial%2 == 1 {
			qperm, cperm = rng.Perm(nq), rng.Perm(nc)
		}
		var e abi.Encoder // what the host groups them with; it never encoded req
		flat, bounds, err := e.CheckedOwnerLists(req, owners)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		a := &Assignment{Owned: make([][]int, nc)}
		a.fromOwners(req, flat, bounds, qperm, cperm)
		for i, r := range want.Results {
			c, list := i, r.Indices
			if cperm != nil {
				c = cperm[i]
			}
			if qperm != nil {
				list = nil
				for _, q := range r.Indices {
					list = append(list, qperm[q])
				}
			}
			if !slices.Equal(a.Owned[c], list) {
				t.Fatalf("trial %d: consumer %d (%s) owns %v, want %v (owners %v)", trial, c, req.Consumers[i], a.Owned[c], list, owners)
			}
		}
	}
}
