package coordinator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
)

// TestPluginSeesMembersInKeyOrder: a plugin gets a topic's live members in key order through
// joins in any order, members of another topic only, leaves, expiries and a static member's
// restart under a new client id (the group keeps its members in key order as they come and go,
// rather than sorting them for each rebalance). averagely gives member i of that order the i-th
// block of queues, so the stored generation shows the order the plugin saw.
func TestPluginSeesMembersInKeyOrder(t *testing.T) {
	e := newEnv(t)
	e.handoff = coordinator.HandoffEager
	e.topic("T", 128)
	e.topic("U", 2)
	e.group("g", "averagely")
	rng := rand.New(rand.NewPCG(7, 17))
	type who struct{ cid, instance, topic string }
	live := map[string]who{} // by key
	beat := func(w who) {
		t.Helper()
		if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: w.cid, InstanceID: w.instance, Topics: []string{w.topic}}); err != nil {
			t.Fatal(err)
		}
	}
	// step heartbeats every live member but those in quiet, and moves the clock a second.
	step := func(quiet ...string) {
		for key, w := range live {
			if !slices.Contains(quiet, key) {
				beat(w)
			}
		}
		e.advance(time.Second)
	}
	check := func(when string) {
		t.Helper()
		var want []string
		for key, w := range live {
			if w.topic == "T" {
				want = append(want, key)
			}
		}
		slices.Sort(want)
		gens, err := e.store.ListGenerations()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gens {
			if g.Topic != "T" {
				continue
			}
			var got []string // the keys by their first queue's id: the order averagely was given
			for key := range g.Assignment {
				got = append(got, key)
			}
			slices.SortFunc(got, func(a, b string) int { return int(g.Assignment[a][0].QueueID - g.Assignment[b][0].QueueID) })
			if !slices.Equal(got, want) {
				t.Fatalf("%s: the plugin saw the members in the order %v, want %v", when, got, want)
			}
			return
		}
		t.Fatalf("%s: no generation of T", when)
	}
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("c%03d", i))
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for i, key := range keys {
		w := who{cid: key, topic: "T"}
		if i%5 == 4 {
			w.topic = "U"
		}
		if i%7 == 3 { // a static member: its key is its instance id
			w.instance, w.cid = "pod-"+key, "ip-"+key
			key = w.instance
		}
		live[key] = w
		beat(w)
		if i%8 == 7 {
			step()
			check(fmt.Sprintf("after %d joins", i+1))
		}
	}
	for _, key := range keys[:10] {
		for k, w := range live {
			if w.cid == key || w.instance == "pod-"+key {
				if _, err := e.c.Leave("g", w.cid); err != nil {
					t.Fatal(err)
				}
				delete(live, k)
			}
		}
	}
	step()
	check("after 10 leaves")
	// A static member restarts under a new client id: same key, same place.
	for k, w := range live {
		if w.instance != "" && w.topic == "T" {
			w.cid = "restarted-" + w.cid
			live[k] = w
			beat(w)
			break
		}
	}
	step()
	check("after a static member's restart")
	// Five members stop heartbeating and expire.
	var quiet []string
	for k := range live {
		if len(quiet) < 5 {
			quiet = append(quiet, k)
		}
	}
	for range 12 {
		step(quiet...)
	}
	for _, k := range quiet {
		delete(live, k)
	}
	step()
	check("after 5 expiries")
}

// gatedAllocator is fakeAllocator whose calls wait for the test: entered says a call began,
// and the call answers when release is closed.
type gatedAllocator struct {
	*fakeAllocator
	entered chan struct{}
	release chan struct{}
}

func (g *gatedAllocator) Allocate(ctx context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.fakeAllocator.Allocate(ctx, plugin, req)
}

// TestStaticRestartDuringThePluginCall: a static member that restarts under a new client id
// while the plugin computes a generation is named by its new client id in that generation: the
// client ids are those of the keys when the generation is installed, not when the call began.
func TestStaticRestartDuringThePluginCall(t *testing.T) {
	gate := &gatedAllocator{fakeAllocator: newFakeAllocator(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, func(o *coordinator.Options) { o.Allocator = gate })
	e.topic("T", 6)
	e.group("g", "averagely")
	join := func(cid, instance string) {
		t.Helper()
		if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, InstanceID: instance, Topics: []string{"T"}}); err != nil {
			t.Fatal(err)
		}
	}
	join("10.0.0.1@1", "pod-1")
	join("10.0.0.2@1", "pod-2")
	e.clock.Advance(time.Second)
	done := make(chan struct{})
	go func() { e.tick(); close(done) }()
	<-gate.entered
	join("10.0.0.9@7", "pod-1") // pod-1 restarts while the plugin runs
	close(gate.release)
	<-done
	gens, err := e.store.ListGenerations()
	if err != nil || len(gens) != 1 {
		t.Fatalf("%d generations stored, %v", len(gens), err)
	}
	if got := gens[0].CIDs; got["pod-1"] != "10.0.0.9@7" || got["pod-2"] != "10.0.0.2@1" {
		t.Fatalf("the generation names client ids %v, want pod-1 under 10.0.0.9@7", got)
	}
}
