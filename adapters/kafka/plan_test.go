package kafka

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// The adapter's plan (slices) with its cooperative adjustment gives the same SyncGroup
// assignments, byte for byte, as kgo's own BalancePlan with AdjustCooperative for the same plan:
// random groups whose members claim overlapping partitions at different generations (stale
// claims, KIP-792), claims out of range and on topics not balanced, members subscribed to
// some topics only, and members planned nothing.
func TestAdjustCooperativeAsKgo(t *testing.T) {
	b, err := NewBalancer(context.Background(), Config{PluginFile: wasmbuild.Plugin(t, "averagely"), CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(11, 17))
	names := []string{"a", "b", "c"}
	var changed, stale int
	for n := range 400 {
		topics := map[string]int32{}
		for _, tp := range names[:1+rng.IntN(len(names))] {
			topics[tp] = int32(1 + rng.IntN(40))
		}
		members := make([]kmsg.JoinGroupResponseMember, 1+rng.IntN(8))
		for i := range members {
			var interests []string
			owned := map[string][]int32{}
			for tp, np := range topics {
				if rng.IntN(5) > 0 {
					interests = append(interests, tp)
				}
				for range rng.IntN(int(np) + 3) {
					owned[tp] = append(owned[tp], int32(rng.IntN(int(np)+2))) // some out of range
				}
			}
			if rng.IntN(4) == 0 {
				owned["gone"] = []int32{0, 1} // a topic no longer balanced
			}
			members[i] = kmsg.JoinGroupResponseMember{
				MemberID:         fmt.Sprintf("m%02d-%d", rng.IntN(100), i),
				ProtocolMetadata: b.JoinGroupMetadata(interests, owned, int32(rng.IntN(3))),
			}
		}
		mb, _, err := b.MemberBalancer(members)
		if err != nil {
			t.Fatal(err)
		}
		cb := mb.(*kgo.ConsumerBalancer)
		v := b.view(cb, topics)
		ours := newPlan(v)
		theirs := cb.NewPlan()
		for tpos, tp := range v.topics {
			for p := range v.counts[tpos] {
				if rng.IntN(10) == 0 {
					continue // a partition nobody is planned
				}
				o := rng.IntN(len(v.members))
				ours.owners[tpos][p] = int32(o)
				theirs.AddPartition(v.members[o].m, tp, p)
			}
		}
		before := theirs.String()
		theirs.AdjustCooperative(cb)
		if theirs.String() != before {
			changed++
		}
		ours.adjustCooperative()
		want, got := theirs.IntoSyncAssignment(), ours.IntoSyncAssignment()
		if len(got) != len(want) {
			t.Fatalf("case %d: %d assignments, kgo %d", n, len(got), len(want))
		}
		for i := range want {
			if got[i].MemberID != want[i].MemberID || !bytes.Equal(got[i].MemberAssignment, want[i].MemberAssignment) {
				t.Fatalf("case %d, member %s: got %s, kgo %s", n, want[i].MemberID, decode(t, got[i].MemberAssignment), decode(t, want[i].MemberAssignment))
			}
		}
		gens := map[[2]int32]map[int32]bool{}
		for _, c := range v.claims {
			k := [2]int32{c.topic, c.partition}
			if gens[k] == nil {
				gens[k] = map[int32]bool{}
			}
			gens[k][v.members[c.member].gen] = true
		}
		for _, g := range gens {
			if len(g) > 1 {
				stale++
				break
			}
		}
	}
	// The cases must exercise what they claim to: held-back moves and stale claims.
	if changed < 100 || stale < 100 {
		t.Fatalf("only %d cases with a held-back move and %d with claims at two generations", changed, stale)
	}
}

func decode(t *testing.T, raw []byte) string {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	s := ""
	for _, tp := range a.Topics {
		s += fmt.Sprintf("%s%v ", tp.Topic, tp.Partitions)
	}
	return s
}

// A plugin's answer reaches the plan the same way in either form (ABI.md §5: one index list per
// consumer, or since 1.1 an owner per queue), over two topics in one request; and an answer that
// leaves a partition without an owner is refused in either form.
func TestTakeEitherForm(t *testing.T) {
	v := &view{
		members: make([]member, 3),
		topics:  []string{"a", "b"},
		counts:  []int32{3, 2},
	}
	// The request's queues: a/0 a/1 a/2 b/0 b/1. who maps the request's consumers to members.
	who := []int{2, 0, 1}
	owners := []int32{0, 1, 1, 2, 0}
	list := &abi.Response{Results: []abi.Result{{Indices: []int{0, 4}}, {Indices: []int{1, 2}}, {Indices: []int{3}}}}
	want := [][]int32{{2, 0, 0}, {1, 2}}
	for name, resp := range map[string]*abi.Response{"owners": {Owners: owners}, "lists": list} {
		p := newPlan(v)
		if err := p.take([]int{0, 1}, who, resp); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.EqualFunc(p.owners, want, slices.Equal) {
			t.Fatalf("%s: owners %v, want %v", name, p.owners, want)
		}
	}
	short := &abi.Response{Results: []abi.Result{{Indices: []int{0, 4}}, {Indices: []int{1, 2}}, {}}}
	gap := &abi.Response{Owners: []int32{0, 1, abi.NoOwner, 2, 0}}
	for name, resp := range map[string]*abi.Response{"owners": gap, "lists": short} {
		if err := newPlan(v).take([]int{0, 1}, who, resp); err == nil {
			t.Fatalf("%s: an answer with an unowned partition was taken", name)
		}
	}
}

// A cooperative plan holds back what moves away from a member that still owns it; an eager one
// (Config.Eager: every member revokes everything before it joins) places every partition.
func TestEagerPlacesEverything(t *testing.T) {
	topics := map[string]int32{"t": 8}
	plans := map[bool]map[string][]int32{}
	for _, eager := range []bool{false, true} {
		b, err := NewBalancer(context.Background(), Config{PluginFile: wasmbuild.Plugin(t, "averagely"), CacheDir: cacheDir, Eager: eager})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.IsCooperative() == eager {
			t.Fatalf("eager %v: IsCooperative %v", eager, b.IsCooperative())
		}
		members := []kmsg.JoinGroupResponseMember{
			{MemberID: "a", ProtocolMetadata: b.JoinGroupMetadata([]string{"t"}, map[string][]int32{"t": {0, 1, 2, 3, 4, 5, 6, 7}}, 4)},
			{MemberID: "b", ProtocolMetadata: b.JoinGroupMetadata([]string{"t"}, nil, -1)},
		}
		mb, _, err := b.MemberBalancer(members)
		if err != nil {
			t.Fatal(err)
		}
		into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
		if err != nil {
			t.Fatal(err)
		}
		plan := map[string][]int32{}
		for _, a := range into.IntoSyncAssignment() {
			var m kmsg.ConsumerMemberAssignment
			if err := m.ReadFrom(a.MemberAssignment); err != nil {
				t.Fatal(err)
			}
			for _, tp := range m.Topics {
				plan[a.MemberID] = append(plan[a.MemberID], tp.Partitions...)
			}
		}
		plans[eager] = plan
	}
	// averagely gives a 0-3 and b 4-7; cooperatively b waits for a to revoke 4-7.
	if got := plans[true]; !slices.Equal(got["a"], []int32{0, 1, 2, 3}) || !slices.Equal(got["b"], []int32{4, 5, 6, 7}) {
		t.Fatalf("eager plan %v", got)
	}
	if got := plans[false]; !slices.Equal(got["a"], []int32{0, 1, 2, 3}) || len(got["b"]) != 0 {
		t.Fatalf("cooperative plan %v", got)
	}
}
