package rocketmq

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/allocd/allocd/plugins/averagely"
)

// The whole-group cache answers every consumer of a rebalance from one plugin call, with each
// caller's own pointers even when its mqAll is a fresh copy of the cached one, and an input in
// any order gets the answer of the same input in the client's order.
func TestCacheAnswersEachCallFromItsOwnInput(t *testing.T) {
	s := open(t, "averagely", Config{})
	r := rand.New(rand.NewPCG(3, 4))
	mqAll, cidAll := rocketmqGroup(r, 50, 7)
	calls := func() int64 { return s.s.Status().Stats.Calls }
	before := calls()
	for _, cid := range cidAll {
		if got, want := s.Allocate("CG", cid, mqAll, cidAll), consumer.AllocateByAveragely("CG", cid, mqAll, cidAll); !same(got, want) {
			t.Fatalf("%s: %v, want %v", cid, got, want)
		}
	}
	if n := calls() - before; n != 1 {
		t.Fatalf("one rebalance of %d consumers made %d plugin calls, want 1", len(cidAll), n)
	}
	// A fresh copy of the route and of cidAll, as another consumer's rebalance builds them: a
	// hit, answered in the fresh pointers.
	fresh := make([]*primitive.MessageQueue, len(mqAll))
	for i, q := range mqAll {
		c := *q
		fresh[i] = &c
	}
	freshCids := make([]string, len(cidAll))
	for i, c := range cidAll {
		freshCids[i] = string([]byte(c))
	}
	before = calls()
	for _, cid := range cidAll {
		if got, want := s.Allocate("CG", cid, fresh, freshCids), consumer.AllocateByAveragely("CG", cid, fresh, freshCids); !same(got, want) {
			t.Fatalf("fresh copy, %s: %v, want %v", cid, got, want)
		}
	}
	if n := calls() - before; n != 0 {
		t.Fatalf("an equal input made %d plugin calls, want 0", n)
	}
	// A changed queue value is a miss, not a stale hit.
	changed := slices.Clone(fresh)
	changed[len(changed)-1] = &primitive.MessageQueue{Topic: "TopicTest", BrokerName: "broker-z", QueueId: 0}
	before = calls()
	if got, want := s.Allocate("CG", cidAll[0], changed, cidAll), consumer.AllocateByAveragely("CG", cidAll[0], changed, cidAll); !same(got, want) {
		t.Fatalf("changed queue: %v, want %v", got, want)
	}
	if n := calls() - before; n != 1 {
		t.Fatalf("a changed queue made %d plugin calls, want 1", n)
	}

	// Shuffled mqAll and cidAll: the same queues per consumer as the sorted input gives.
	shuffledQ, shuffledC := slices.Clone(mqAll), slices.Clone(cidAll)
	r.Shuffle(len(shuffledQ), func(i, j int) { shuffledQ[i], shuffledQ[j] = shuffledQ[j], shuffledQ[i] })
	r.Shuffle(len(shuffledC), func(i, j int) { shuffledC[i], shuffledC[j] = shuffledC[j], shuffledC[i] })
	for _, cid := range cidAll {
		got := s.Allocate("CG", cid, shuffledQ, shuffledC)
		want := consumer.AllocateByAveragely("CG", cid, mqAll, cidAll)
		if !same(got, want) {
			t.Fatalf("shuffled input, %s: %v, want %v", cid, got, want)
		}
	}
	// A repeated client id gets the first copy's answer, as the client's index lookup does,
	// also when the cid passed is the second copy's own string (a hit finds a cid of cidAll by
	// its address first).
	dup := append(slices.Clone(cidAll), string([]byte(cidAll[2])))
	slices.Sort(dup)
	for _, cid := range append(dup, cidAll[2]) {
		if got, want := s.Allocate("CG", cid, mqAll, dup), consumer.AllocateByAveragely("CG", cid, mqAll, dup); !same(got, want) {
			t.Fatalf("repeated id, %s: %v, want %v", cid, got, want)
		}
	}
}

// A caller that reuses its buffers with new contents gets the answer to the new contents: the
// cache compares what the slices hold, never only where they are.
func TestCacheSeesABufferReusedInPlace(t *testing.T) {
	s := open(t, "averagely", Config{})
	mqAll, cidAll := rocketmqGroup(rand.New(rand.NewPCG(9, 10)), 40, 6)
	sorted := slices.Clone(mqAll) // the route in the client's order, whatever mqAll holds
	check := func(what string) {
		t.Helper()
		for _, cid := range cidAll {
			if got, want := s.Allocate("CG", cid, mqAll, cidAll), consumer.AllocateByAveragely("CG", cid, sorted, cidAll); !same(got, want) {
				t.Fatalf("%s, %s: %v, want %v", what, cid, got, want)
			}
		}
	}
	check("first")
	// A consumer id overwritten in place, the array sorted again: the consumers after it move.
	cidAll[1] = "9.9.9.9@1"
	slices.Sort(cidAll)
	check("consumer overwritten")
	// Two queues swapped in place: the answer is still the client's order's.
	mqAll[0], mqAll[len(mqAll)-1] = mqAll[len(mqAll)-1], mqAll[0]
	check("queues swapped")
	// One consumer fewer, in the same array.
	cidAll = cidAll[:len(cidAll)-1]
	check("consumer dropped")
}

// The cache keeps at most maxCached (group, topic) entries.
func TestCacheIsBounded(t *testing.T) {
	s := open(t, "averagely", Config{})
	mqAll, cidAll := rocketmqGroup(rand.New(rand.NewPCG(5, 6)), 4, 2)
	for i := range maxCached + 10 {
		if got := s.Allocate("CG"+string(rune('a'+i%26))+string(rune(i)), cidAll[0], mqAll, cidAll); len(got) == 0 {
			t.Fatalf("group %d: no queues", i)
		}
	}
	s.cache.mu.Lock()
	n := len(s.cache.m)
	s.cache.mu.Unlock()
	if n > maxCached {
		t.Fatalf("%d cached entries, bound %d", n, maxCached)
	}
}

// AVG's answer on a sorted mqAll is a run of mqAll: a hit returns it in place, allocating
// nothing, and an append to the answer copies instead of writing into the caller's mqAll.
func TestHitOfARunAllocatesNothing(t *testing.T) {
	s := open(t, "averagely", Config{})
	mqAll, cidAll := rocketmqGroup(rand.New(rand.NewPCG(7, 8)), 64, 5)
	keep := slices.Clone(mqAll)
	got := s.Allocate("CG", cidAll[0], mqAll, cidAll) // the miss
	if want := consumer.AllocateByAveragely("CG", cidAll[0], mqAll, cidAll); !same(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	_ = append(got, &primitive.MessageQueue{Topic: "X"})
	if !slices.Equal(mqAll, keep) {
		t.Fatal("an append to the answer wrote into mqAll")
	}
	if n := testing.AllocsPerRun(100, func() { s.Allocate("CG", cidAll[1], mqAll, cidAll) }); n != 0 {
		t.Fatalf("a hit allocated %v times, want 0", n)
	}
}

// fromOwners gives every consumer the queues the owners name, in queue order, as runs where
// the owners never decrease and leave nothing unowned, as a list otherwise: on random owners,
// AVG-like runs (of any lengths, empty ones too), AVG's own answer, and runs spoilt at one place.
func TestFromOwnersMatchesTheOwners(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 3000 {
		nq, nc := r.IntN(70), 1+r.IntN(20)
		owners := make([]int32, nq)
		for q := range owners {
			owners[q] = int32(r.IntN(nc+1) - 1)
		}
		switch r.IntN(4) {
		case 0: // AVG's own answer, which fromOwners recognizes whole, or spoilt at one place
			averagely.Owners(owners, nc)
			if r.IntN(2) == 0 && nq > 0 {
				owners[r.IntN(nq)] = int32(r.IntN(nc+1) - 1)
			}
		case 1, 2:
			slices.Sort(owners)
			for q := range owners {
				owners[q] = max(owners[q], 0)
			}
			if r.IntN(3) == 0 && nq > 0 {
				owners[r.IntN(nq)] = int32(r.IntN(nc+1) - 1)
			}
		}
		e := &cached{sorted: make([]string, nc)}
		var c groupCache
		if c.avgFor(nq, nc) != nil {
			t.Fatal("AVG's answer built at the first miss of its sizes")
		}
		avg := c.avgFor(nq, nc) // the second miss of these sizes in a row builds it
		if avg == nil {
			t.Fatal("no AVG answer at the second miss of one size")
		}
		e.fromOwners(owners, avg)
		if slices.Equal(owners, avg.owners) && &e.start[0] != &avg.start[0] {
			t.Fatalf("owners %v are AVG's answer, but fromOwners did not take its runs", owners)
		}
		for i := range nc {
			var want, got []int32
			for q, o := range owners {
				if o == int32(i) {
					want = append(want, int32(q))
				}
			}
			for k := e.start[i]; k < e.start[i+1]; k++ {
				if e.runs {
					got = append(got, k)
				} else {
					got = append(got, e.flat[k])
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("owners %v, consumer %d of %d: %v (runs %v), want %v", owners, i, nc, got, e.runs, want)
			}
		}
		sorted := slices.IsSorted(owners) && (nq == 0 || owners[0] >= 0)
		if e.runs != sorted {
			t.Fatalf("owners %v: runs %v, want %v", owners, e.runs, sorted)
		}
	}
}
