package sticky

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
)

// viewOf encodes g as a whole-group request and parses it, as the plugin receives it.
func viewOf(t testing.TB, g *Group) *abi.View {
	t.Helper()
	r := &abi.Request{Group: "g", Queues: g.Queues, Consumers: g.Consumers, PrevOwners: g.PrevOwners}
	if g.QueueZones != nil {
		r.QueueAttrs = make([]abi.Attrs, len(g.Queues))
		for i, z := range g.QueueZones {
			if z != "" {
				r.QueueAttrs[i].Labels = map[string]string{ZoneLabel: z}
			}
		}
	}
	if g.ConsumerZones != nil {
		r.ConsumerAttrs = make([]abi.Attrs, len(g.Consumers))
		for j, z := range g.ConsumerZones {
			if z != "" {
				r.ConsumerAttrs[j].Labels = map[string]string{ZoneLabel: z}
			}
		}
	}
	b, err := abi.EncodeRequest(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	v, err := abi.ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A Memo carried from one group to the next, read from Groups and from requests, gives every
// group the plan of the oracle (Assign as it was, without a Memo): the same group again, members
// leaving and joining (the ring derived from the last one), repeated ids, other vnodes, previous
// owners from the last plan, zones coming and going.
func TestMemoUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 11))
	for round := range 60 {
		var direct, viewed Memo
		n := r.IntN(1200)
		g := &Group{Queues: queues(n), Consumers: consumers(r, 1+r.IntN(80))}
		opt := Options{Balance: 1 + r.Float64(), VirtualNodes: 1 + r.IntN(100)}
		for step := range 12 {
			want := assignBefore(g, opt)
			if got := direct.Assign(g, opt); !slices.Equal(got, want) {
				t.Fatalf("round %d step %d (%d queues, %d consumers, %+v): the Group plan differs", round, step, n, len(g.Consumers), opt)
			}
			owners := make([]int32, n)
			viewed.AssignView(viewOf(t, g), opt, owners)
			for i, o := range owners {
				if int(o) != want[i] {
					t.Fatalf("round %d step %d (%d queues, %d consumers, %+v): the request plan differs at queue %d: %d, want %d", round, step, n, len(g.Consumers), opt, i, o, want[i])
				}
			}
			next := &Group{Queues: g.Queues, Consumers: slices.Clone(g.Consumers), PrevOwners: names(g, want)}
			switch k := r.IntN(8); {
			case k == 0: // the same members again
			case k <= 2 && len(next.Consumers) > 1: // some leave
				for range 1 + r.IntN(3) {
					if len(next.Consumers) > 1 {
						next.Consumers = deleteAt(next.Consumers, r.IntN(len(next.Consumers)))
					}
				}
				next.Consumers = slices.Compact(next.Consumers)
			case k <= 4: // some join
				for _, id := range consumers(r, 1+r.IntN(4)) {
					if !slices.Contains(next.Consumers, id) {
						next.Consumers = append(next.Consumers, id)
					}
				}
				slices.Sort(next.Consumers)
			case k == 5: // a repeated id
				next.Consumers = append(next.Consumers, next.Consumers[r.IntN(len(next.Consumers))])
				slices.Sort(next.Consumers)
			case k == 6:
				opt.VirtualNodes = 1 + r.IntN(100)
			default: // zones
				if g.QueueZones == nil {
					zones := []string{"a", "b", ""}
					next.QueueZones = make([]string, n)
					for i := range next.QueueZones {
						next.QueueZones[i] = zones[r.IntN(len(zones))]
					}
					next.ConsumerZones = make([]string, len(next.Consumers))
					for j := range next.ConsumerZones {
						next.ConsumerZones[j] = zones[r.IntN(len(zones))]
					}
				}
			}
			if g.QueueZones != nil && next.QueueZones == nil && r.IntN(2) == 0 { // zones stay
				next.QueueZones = g.QueueZones
				next.ConsumerZones = make([]string, len(next.Consumers))
				for j := range next.ConsumerZones {
					next.ConsumerZones[j] = []string{"a", "b", ""}[j%3]
				}
			}
			g = next
		}
	}
}

// derive refuses a ring whose renumbering reorders two points of one position (ties order by
// member index), so that the ring is built anew.
func TestDeriveRefusesReorderedTies(t *testing.T) {
	var m Memo
	m.ringIDs = []string{"b", "a"}
	m.ringNodes, m.hasRing = 1, true
	m.ring.points = []point{newPoint(1<<40, 0), newPoint(1<<40, 1)}
	m.ids, m.nids, m.members = []string{"a", "b"}, 2, []int32{0, 1}
	if m.derive(1) {
		t.Fatal("derive renumbered a tie out of order and kept the ring")
	}
	m.ids, m.nids, m.members = []string{"b", "c"}, 2, []int32{0, 1}
	m.indexed = false
	m.ring.points = []point{newPoint(1<<40, 0), newPoint(1<<40, 1)}
	if !m.derive(1) {
		t.Fatal("derive refused a ring whose order the renumbering keeps")
	}
	want := append([]point{newPoint(1<<40, 0)}, appendPoints(nil, "c", 1, 1)...)
	slices.Sort(want)
	if !slices.Equal(m.ring.points, want) {
		t.Fatalf("derived ring %x, want %x", m.ring.points, want)
	}
}

// The Kafka comparison's group (BenchmarkAssign1024x64) through one Memo: "fresh-memo" and
// "steady-memo" repeat one group (the ring taken back as it is), "rebalance-memo" alternates the
// fresh and the steady group (the ring derived: one member leaves, then joins).
func BenchmarkAssignMemo1024x64(b *testing.B) {
	g, steady := kafkaGroups()
	for _, c := range []struct {
		name   string
		groups []*Group
	}{{"fresh-memo", []*Group{g}}, {"steady-memo", []*Group{steady}}, {"rebalance-memo", []*Group{g, steady}}} {
		b.Run(c.name, func(b *testing.B) {
			var m Memo
			views := make([]*abi.View, len(c.groups))
			for k, g := range c.groups {
				views[k] = viewOf(b, g)
			}
			owners := make([]int32, len(g.Queues))
			k := 0
			for b.Loop() {
				m.AssignView(views[k%len(views)], defaults(), owners)
				k++
			}
		})
	}
}

func deleteAt(s []string, i int) []string { return slices.Delete(s, i, i+1) }
