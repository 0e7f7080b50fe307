package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/store"
)

// AllocateOwners makes wasmAllocator a coordinator.OwnerAllocator, as the daemon's registry is.
func (a *wasmAllocator) AllocateOwners(ctx context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	p := a.plugins[plugin]
	if p == nil {
		return nil, "", fmt.Errorf("plugin %q: not loaded", plugin)
	}
	resp, err := p.AllocateOwners(ctx, req)
	return resp, p.Hash(), err
}

var _ coordinator.OwnerAllocator = (*wasmAllocator)(nil)

// listOnly hides an allocator's AllocateOwners: the coordinator calls Allocate, as before ABI 1.1.
type listOnly struct{ coordinator.Allocator }

// storedGenerations is every generation of e's store, as JSON: the bytes the store keeps.
func (e *env) storedGenerations() []byte {
	e.t.Helper()
	gens, err := e.store.ListGenerations()
	if err != nil {
		e.t.Fatal(err)
	}
	slices.SortFunc(gens, func(a, b store.Generation) int { return strings.Compare(a.Group+"/"+a.Topic, b.Group+"/"+b.Topic) })
	b, err := json.Marshal(gens)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// TestOwnerFormGenerations runs one history of joins and leaves through two coordinators over
// the built-in wasm plugins, one reading the owner form (AllocateOwners) and one the list form
// (Allocate): the generations they store are the same bytes. averagely's owners are runs, hash's
// any order (circle's and sticky's are covered by the latter; compiling a plugin under -race takes
// tens of seconds, so two are loaded).
func TestOwnerFormGenerations(t *testing.T) {
	wasm := newWasmAllocator(t, "averagely", "hash")
	for _, strategy := range []string{"averagely", "hash"} {
		t.Run(strategy, func(t *testing.T) {
			owners := newEnv(t, func(o *coordinator.Options) { o.Allocator = wasm })
			lists := newEnv(t, func(o *coordinator.Options) { o.Allocator = listOnly{wasm} })
			both := func(f func(e *env)) {
				f(owners)
				f(lists)
				if a, b := owners.storedGenerations(), lists.storedGenerations(); !bytes.Equal(a, b) {
					t.Fatalf("stored generations differ:\nowner form: %s\nlist form:  %s", a, b)
				}
			}
			both(func(e *env) {
				brokers := []coordinator.Broker{{Name: "broker-b", ReadQueues: 13, WriteQueues: 13}, {Name: "broker-a", ReadQueues: 7, WriteQueues: 7}}
				if _, _, err := e.c.PutTopic("T", brokers); err != nil {
					t.Fatal(err)
				}
				e.group("g", strategy)
			})
			// More members than queues at the end: some own nothing, and their lists are empty.
			for _, n := range []int{1, 3, 8, 21, 25} {
				both(func(e *env) {
					for i := range n {
						e.hb("g", fmt.Sprintf("10.0.0.%d@%d", 9-i%10, i), "T")
					}
					e.advance(time.Second)
				})
			}
			both(func(e *env) { // all but four stop heartbeating and expire
				for range 3 * session / time.Second {
					for i := range 4 {
						e.hb("g", fmt.Sprintf("10.0.0.%d@%d", 9-i%10, i), "T")
					}
					e.advance(time.Second)
				}
			})
			if n := owners.gen("g", "T"); n < 4 {
				t.Fatalf("generation %d after six changes of membership", n)
			}
			s := owners.status("g").Topics["T"]
			if s.Error != "" || s.State != model.StateStable {
				t.Fatalf("owner form: %+v", s)
			}
		})
	}
}

// ownerAnswer answers every call with fixed owners, in the owner form.
type ownerAnswer struct{ owners []int32 }

func (a ownerAnswer) Allocate(context.Context, string, *abi.Request) (*abi.Response, string, error) {
	return nil, "", fmt.Errorf("Allocate called on an OwnerAllocator")
}

func (a ownerAnswer) AllocateOwners(_ context.Context, _ string, req *abi.Request) (*abi.Response, string, error) {
	return &abi.Response{Owners: slices.Clone(a.owners)}, "v1", nil
}

// TestOwnerFormChecked: an owner-form answer that names a consumer out of range, or the wrong
// number of queues, fails the rebalance with an error naming it; the previous generation stays.
func TestOwnerFormChecked(t *testing.T) {
	for _, tc := range []struct {
		owners []int32
		want   string
	}{
		{[]int32{0, 1, 2, 7}, "owner index 7 out of range"},
		{[]int32{0, 1, -5, 1}, "owner index -5 out of range"},
		{[]int32{0, 1, 1}, "owners of 3 queues, the request has 4"},
	} {
		answer := &ownerAnswer{owners: []int32{0, 0, 1, abi.NoOwner}}
		e := newEnv(t, func(o *coordinator.Options) { o.Allocator = answer })
		e.topic("T", 4)
		e.group("g", "averagely")
		e.hb("g", "c1", "T")
		e.hb("g", "c2", "T")
		e.hb("g", "c3", "T")
		e.advance(time.Second)
		if got := ids(e.hb("g", "c1", "T").Queues["T"]); !slices.Equal(got, []int32{0, 1}) {
			t.Fatalf("c1 has %v, want [0 1]", got)
		}
		answer.owners = tc.owners
		e.hb("g", "c4", "T")
		e.advance(300 * time.Millisecond)
		s := e.status("g").Topics["T"]
		if s.Generation != 1 || s.State != model.StatePluginFailing || !strings.Contains(s.Error, tc.want) {
			t.Errorf("owners %v: %+v; want generation 1 kept and an error with %q", tc.owners, s, tc.want)
		}
	}
}

// BenchmarkWholeGroupCall is the coordinator's plugin call for the whole-group request of issue
// 17 (1,024 queues: T on broker-0..3 x 256; 64 consumers) with the built-in wasm plugins:
// "owners" as the daemon makes it (AllocateOwners, the queue lists built from the owners),
// "lists" as it was made before (Allocate: the host resolves the owners into 64 index lists,
// the coordinator validates them again and copies them into queue lists).
func BenchmarkWholeGroupCall(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(b.TempDir(), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	wasm := newWasmAllocator(b, "averagely", "circle", "hash")
	req := &abi.Request{Group: "g"}
	for br := range 4 {
		broker := fmt.Sprintf("broker-%d", br)
		for q := range 256 {
			req.Queues = append(req.Queues, abi.Queue{Topic: "T", BrokerName: broker, QueueID: int32(q)})
		}
	}
	for i := range 64 {
		req.Consumers = append(req.Consumers, fmt.Sprintf("10.0.0.%d@%d", i+1, 4000+i))
	}
	abi.Canonicalize(req)
	for _, strategy := range []string{"averagely", "circle", "hash"} {
		var want map[string][]abi.Queue
		for _, form := range []struct {
			name  string
			alloc coordinator.Allocator
		}{{"owners", wasm}, {"lists", listOnly{wasm}}} {
			b.Run(strategy+"/"+form.name, func(b *testing.B) {
				c, err := coordinator.New(coordinator.Options{Store: st, Allocator: form.alloc})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				got, _, err := c.AllocateForTest(ctx, strategy, req)
				if err != nil {
					b.Fatal(err)
				}
				if want == nil {
					want = got
				} else if !maps.EqualFunc(got, want, slices.Equal) {
					b.Fatal("the owner and list forms give different assignments")
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := c.AllocateForTest(ctx, strategy, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestOwnerFormRuns: AVG-like owners (never decreasing, none missing) give each member the run of
// mqAll it owns, and a caller appending to one member's queues does not write into the next's.
func TestOwnerFormRuns(t *testing.T) {
	e := newEnv(t, func(o *coordinator.Options) { o.Allocator = &ownerAnswer{owners: []int32{0, 0, 1, 1, 1}} })
	e.handoff = model.HandoffEager // members get the plugin's lists as they are
	e.topic("T", 5)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	first := e.hb("g", "c1", "T").Queues["T"]
	if got := ids(first); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("c1 has %v, want [0 1]", got)
	}
	_ = append(first, abi.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 99})
	if got := ids(e.hb("g", "c2", "T").Queues["T"]); !slices.Equal(got, []int32{2, 3, 4}) {
		t.Fatalf("c2 has %v after an append to c1's queues, want [2 3 4]", got)
	}
}
