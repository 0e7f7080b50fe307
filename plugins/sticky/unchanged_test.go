package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
)

// The bucketed ring gives exactly the plans of the comparison-sorted ring it replaced, on random
// groups: sizes from empty to rings past the index's bucket cap, repeated ids, previous owners
// (some gone), zones, and any vnodes and balance.
func TestAssignUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	for round := range 400 {
		n, m := r.IntN(1500), 1+r.IntN(120)
		if round%50 == 0 {
			n, m = 3000, 300 // 300 x 400 vnodes: a ring past 2^16 buckets' worth
		}
		g := &Group{Queues: queues(n), Consumers: consumers(r, m)}
		if r.IntN(5) == 0 && m > 1 { // a repeated id
			g.Consumers = append(g.Consumers, g.Consumers[r.IntN(m)])
			slices.Sort(g.Consumers)
		}
		if r.IntN(2) == 0 {
			g.PrevOwners = make([]string, n)
			for i := range g.PrevOwners {
				switch k := r.IntN(10); {
				case k < 7:
					g.PrevOwners[i] = g.Consumers[r.IntN(len(g.Consumers))]
				case k < 8:
					g.PrevOwners[i] = fmt.Sprintf("gone-%d", r.IntN(5))
				}
			}
		}
		if r.IntN(3) == 0 {
			zones := []string{"a", "b", "c", ""}
			g.QueueZones = make([]string, n)
			for i := range g.QueueZones {
				g.QueueZones[i] = zones[r.IntN(len(zones))]
			}
			g.ConsumerZones = make([]string, len(g.Consumers))
			for j := range g.ConsumerZones {
				g.ConsumerZones[j] = zones[r.IntN(len(zones))]
			}
		}
		opt := Options{Balance: 1 + r.Float64(), VirtualNodes: 1 + r.IntN(200)}
		if round%50 == 0 {
			opt.VirtualNodes = 400
		}
		got, want := Assign(g, opt), assignBefore(g, opt)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (%d queues, %d consumers, %+v): the plans differ", round, n, len(g.Consumers), opt)
		}
	}
}

// assignBefore is Assign as it was before the bucketed ring (a comparison sort of the ring and
// a bisection per walk), kept as the oracle of TestAssignUnchanged. It returns the owner of every queue: owners[i] is the index in g.Consumers of the first
// occurrence of the owning id, or -1 when the group has no consumers.
func assignBefore(g *Group, opt Options) []int {
	if opt.Balance < 1 {
		opt.Balance = DefaultBalance
	}
	if opt.VirtualNodes < 1 {
		opt.VirtualNodes = DefaultVirtualNodes
	}
	n := len(g.Queues)
	owners := make([]int, n)
	for i := range owners {
		owners[i] = -1
	}
	// Members: the first occurrence of every id.
	index := make(map[string]int, len(g.Consumers))
	var members []int
	for j, id := range g.Consumers {
		if _, ok := index[id]; !ok {
			index[id] = j
			members = append(members, j)
		}
	}
	if len(members) == 0 || n == 0 || len(g.Consumers) > MaxConsumers {
		return owners
	}
	bound := Bound(n, len(members), opt.Balance)
	load := make([]int, len(g.Consumers))
	held := make([]int, len(g.Consumers)) // queues each member owned in the previous generation

	// Pass 1: keep queues with their previous owners, under the bound.
	var shed, rest []int
	for i := 0; i < n; i++ {
		j := -1
		if g.PrevOwners != nil && g.PrevOwners[i] != "" {
			if k, ok := index[g.PrevOwners[i]]; ok {
				j = k
			}
		}
		switch {
		case j < 0:
			rest = append(rest, i)
		case load[j] < bound:
			owners[i] = j
			load[j]++
			held[j]++
		default:
			held[j]++
			shed = append(shed, i)
		}
	}
	if len(shed)+len(rest) == 0 {
		return owners
	}

	// The ring: VirtualNodes points per member, sorted by position (ties by member index).
	ring := make([]point, 0, len(members)*opt.VirtualNodes)
	for _, j := range members {
		h := hashString(g.Consumers[j])
		for v := 0; v < opt.VirtualNodes; v++ {
			ring = append(ring, newPoint(mix(h^(uint64(v)+1)*0x9e3779b97f4a7c15), j))
		}
	}
	slices.Sort(ring)

	// Sub-rings: per zone, and the members that held nothing before (newcomers), each in ring
	// order. A sub-ring found full stays full: loads only grow and the bound is fixed.
	filter := func(keep func(j int) bool) []point {
		var sub []point
		for _, p := range ring {
			if keep(p.member()) {
				sub = append(sub, p)
			}
		}
		return sub
	}
	var zones []string
	zoneRings := map[string][]point{}
	if g.ConsumerZones != nil && g.QueueZones != nil {
		for _, j := range members {
			if z := g.consumerZone(j); z != "" && !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
		slices.Sort(zones)
		for _, z := range zones {
			zoneRings[z] = filter(func(j int) bool { return g.consumerZone(j) == z })
		}
	}
	zoneFull := map[string]bool{}
	var fresh []point
	if len(shed) > 0 {
		fresh = filter(func(j int) bool { return held[j] == 0 })
	}
	freshFull := len(fresh) == 0

	// walk returns the member at or after hash h on sub whose load is under the bound and that
	// accept admits, or -1.
	walk := func(sub []point, h uint64, accept func(j int) bool) int {
		start, _ := slices.BinarySearch(sub, point(h))
		for k := 0; k < len(sub); k++ {
			j := sub[(start+k)%len(sub)].member()
			if load[j] < bound && (accept == nil || accept(j)) {
				return j
			}
		}
		return -1
	}
	place := func(i int, wasShed bool) {
		h := hashQueue(g.Queues[i])
		z := g.queueZone(i)
		zoneRing, zoned := zoneRings[z]
		zoned = zoned && z != ""
		j := -1
		if wasShed && !freshFull {
			if zoned {
				j = walk(fresh, h, func(j int) bool { return g.consumerZone(j) == z })
			}
			if j < 0 {
				if j = walk(fresh, h, nil); j < 0 {
					freshFull = true
				}
			}
		}
		if j < 0 && zoned && !zoneFull[z] {
			if j = walk(zoneRing, h, nil); j < 0 {
				zoneFull[z] = true
			}
		}
		if j < 0 {
			j = walk(ring, h, nil) // never -1: the members can hold every queue
		}
		owners[i] = j
		load[j]++
	}
	for _, i := range shed {
		place(i, true)
	}
	for _, i := range rest {
		place(i, false)
	}
	return owners
}

// hashQueue is a queue's ring position as Assign computed it before queueHasher.
func hashQueue(q abi.Queue) uint64 {
	h := fnvString(fnvOffset, q.Topic)
	h = (h ^ 0) * fnvPrime
	h = fnvString(h, q.BrokerName)
	h = (h ^ 0) * fnvPrime
	for k := 0; k < 4; k++ {
		h ^= uint64(byte(uint32(q.QueueID) >> (8 * k)))
		h *= fnvPrime
	}
	return mix(h)
}

// The zones of a Group as the oracle reads them.
func (g *Group) queueZone(i int) string {
	if g.QueueZones == nil {
		return ""
	}
	return g.QueueZones[i]
}

func (g *Group) consumerZone(j int) string {
	if g.ConsumerZones == nil {
		return ""
	}
	return g.ConsumerZones[j]
}
