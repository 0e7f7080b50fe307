package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

func queues(n int) []abi.Queue {
	qs := make([]abi.Queue, n)
	for i := range qs {
		qs[i] = abi.Queue{Topic: "T", BrokerName: fmt.Sprintf("broker-%d", i%4), QueueID: int32(i / 4)}
	}
	slices.SortFunc(qs, abi.CompareQueues)
	return qs
}

func consumers(rng *rand.Rand, m int) []string {
	var ids []string
	for len(ids) < m {
		id := fmt.Sprintf("10.0.%d.%d@%d", rng.IntN(256), rng.IntN(256), rng.IntN(65536))
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func defaults() Options { return Options{Balance: DefaultBalance, VirtualNodes: DefaultVirtualNodes} }

// loads counts the queues of each consumer index.
func loads(owners []int, m int) []int {
	l := make([]int, m)
	for _, o := range owners {
		l[o]++
	}
	return l
}

// names turns owner indices into consumer ids, the form previous owners take.
func names(g *Group, owners []int) []string {
	out := make([]string, len(owners))
	for i, o := range owners {
		if o >= 0 {
			out[i] = g.Consumers[o]
		}
	}
	return out
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions("", "")
	if err != nil || o.Balance != DefaultBalance || o.VirtualNodes != DefaultVirtualNodes {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if o, err := ParseOptions("1", "7"); err != nil || o.Balance != 1 || o.VirtualNodes != 7 {
		t.Fatalf("1, 7: %+v, %v", o, err)
	}
	if o, err := ParseOptions("2.5", ""); err != nil || o.Balance != 2.5 {
		t.Fatalf("2.5: %+v, %v", o, err)
	}
	for _, bad := range []string{"0.99", "0", "-1", "abc", "NaN", "+Inf", "1,5"} {
		if _, err := ParseOptions(bad, ""); err == nil || !strings.Contains(err.Error(), `"balance"`) || !strings.Contains(err.Error(), ">= 1") {
			t.Errorf("balance %q: err = %v, want a balance error", bad, err)
		}
	}
	for _, bad := range []string{"0", "-3", "x", "1001"} {
		if _, err := ParseOptions("", bad); err == nil || !strings.Contains(err.Error(), `"vnodes"`) {
			t.Errorf("vnodes %q: err = %v, want a vnodes error", bad, err)
		}
	}
}

func TestBound(t *testing.T) {
	for _, c := range []struct {
		n, m    int
		balance float64
		want    int
	}{
		{256, 16, 1.25, 20}, {256, 17, 1.25, 19}, {10, 1, 1.1, 11}, {10, 3, 1, 4}, {1, 300, 1.25, 1},
		{0, 5, 1.25, 0}, {7, 0, 1.25, 0}, {100, 20, 1.25, 7}, {2000, 300, 2, 14},
	} {
		if got := Bound(c.n, c.m, c.balance); got != c.want {
			t.Errorf("Bound(%d, %d, %v) = %d, want %d", c.n, c.m, c.balance, got, c.want)
		}
	}
}

// randomGroup draws a group with, at random, zones and previous owners (some of them gone).
func randomGroup(rng *rand.Rand) *Group {
	n, m := 1+rng.IntN(600), 1+rng.IntN(60)
	g := &Group{Queues: queues(n), Consumers: consumers(rng, m)}
	if rng.IntN(2) == 0 {
		zones := []string{"a", "b", "c"}
		g.QueueZones = make([]string, n)
		for i := range g.QueueZones {
			if rng.IntN(5) > 0 {
				g.QueueZones[i] = zones[rng.IntN(3)]
			}
		}
		g.ConsumerZones = make([]string, m)
		for j := range g.ConsumerZones {
			if rng.IntN(5) > 0 {
				g.ConsumerZones[j] = zones[rng.IntN(3)]
			}
		}
	}
	if rng.IntN(2) == 0 {
		g.PrevOwners = make([]string, n)
		for i := range g.PrevOwners {
			switch rng.IntN(4) {
			case 0, 1:
				g.PrevOwners[i] = g.Consumers[rng.IntN(m)]
			case 2:
				g.PrevOwners[i] = "gone"
			}
		}
	}
	return g
}

// TestBoundAndCoverage: every queue has an owner, nobody is over the bound, for several
// balance factors.
func TestBoundAndCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		g := randomGroup(rng)
		opt := defaults()
		opt.Balance = []float64{1, 1.1, 1.25, 2}[round%4]
		owners := Assign(g, opt)
		bound := Bound(len(g.Queues), len(g.Consumers), opt.Balance)
		for i, o := range owners {
			if o < 0 || o >= len(g.Consumers) {
				t.Fatalf("round %d: queue %d has owner %d", round, i, o)
			}
		}
		for j, l := range loads(owners, len(g.Consumers)) {
			if l > bound {
				t.Fatalf("round %d (balance %v, %d queues, %d consumers): consumer %d has %d queues, bound %d",
					round, opt.Balance, len(g.Queues), len(g.Consumers), j, l, bound)
			}
		}
	}
}

// TestPreviousOwnersKept: a live previous owner keeps its first Bound queues (in mqAll order),
// exactly.
func TestPreviousOwnersKept(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		g := randomGroup(rng)
		if g.PrevOwners == nil {
			continue
		}
		owners := Assign(g, defaults())
		bound := Bound(len(g.Queues), len(g.Consumers), DefaultBalance)
		kept := map[string]int{}
		for i, p := range g.PrevOwners {
			if p == "" || !slices.Contains(g.Consumers, p) {
				continue
			}
			want := kept[p] < bound
			if want {
				kept[p]++
			}
			if got := g.Consumers[owners[i]] == p; got != want {
				t.Fatalf("round %d: queue %d, previous owner %q (kept %d of bound %d): kept = %v, want %v", round, i, p, kept[p], bound, got, want)
			}
		}
	}
}

// TestFixedPoint: feeding an assignment back as the previous owners changes nothing.
func TestFixedPoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		g := randomGroup(rng)
		first := Assign(g, defaults())
		g.PrevOwners = names(g, first)
		if again := Assign(g, defaults()); !slices.Equal(first, again) {
			t.Fatalf("assignment is not a fixed point:\n%v\n%v", first, again)
		}
	}
}

// TestZonePreference: with room in every zone, each zoned queue goes to a consumer of its zone;
// queues of a zone without consumers, and unzoned queues, still get an owner.
func TestZonePreference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := &Group{Queues: queues(240), Consumers: consumers(rng, 12)}
	g.ConsumerZones = make([]string, 12)
	for j := range g.ConsumerZones {
		g.ConsumerZones[j] = []string{"a", "b", "c"}[j%3]
	}
	g.QueueZones = make([]string, 240)
	for i := range g.QueueZones {
		g.QueueZones[i] = []string{"a", "b", "c"}[i%3]
	}
	owners := Assign(g, defaults())
	for i, o := range owners {
		if g.ConsumerZones[o] != g.QueueZones[i] {
			t.Fatalf("queue %d (zone %s) went to consumer %d (zone %s)", i, g.QueueZones[i], o, g.ConsumerZones[o])
		}
	}
	// Without the zone labels the ring alone decides, and crosses zones.
	plain := Assign(&Group{Queues: g.Queues, Consumers: g.Consumers}, defaults())
	crossed := 0
	for i, o := range plain {
		if g.ConsumerZones[o] != g.QueueZones[i] {
			crossed++
		}
	}
	if crossed == 0 {
		t.Fatal("without labels no queue crosses zones: the test proves nothing")
	}
	// A zone with no consumer, and queues without a zone.
	for i := range g.QueueZones {
		switch i % 4 {
		case 0:
			g.QueueZones[i] = "nowhere"
		case 1:
			g.QueueZones[i] = ""
		}
	}
	owners = Assign(g, defaults())
	bound := Bound(240, 12, DefaultBalance)
	for j, l := range loads(owners, 12) {
		if l > bound {
			t.Fatalf("consumer %d has %d queues, bound %d", j, l, bound)
		}
	}
	// A full zone overflows to other zones instead of breaking the bound.
	for i := range g.QueueZones {
		g.QueueZones[i] = "a"
	}
	owners = Assign(g, defaults())
	for j, l := range loads(owners, 12) {
		if l > bound {
			t.Fatalf("all queues in zone a: consumer %d has %d queues, bound %d", j, l, bound)
		}
	}
	inA := 0
	for _, o := range owners {
		if g.ConsumerZones[o] == "a" {
			inA++
		}
	}
	if inA != 4*bound {
		t.Fatalf("zone a's 4 consumers hold %d queues, want them full (%d)", inA, 4*bound)
	}
}

// TestDeterminism: the same input gives the same owners, also from copies of the input.
func TestDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		g := randomGroup(rng)
		a := Assign(g, defaults())
		c := &Group{Queues: slices.Clone(g.Queues), Consumers: slices.Clone(g.Consumers), QueueZones: slices.Clone(g.QueueZones),
			ConsumerZones: slices.Clone(g.ConsumerZones), PrevOwners: slices.Clone(g.PrevOwners)}
		if b := Assign(c, defaults()); !slices.Equal(a, b) {
			t.Fatal("two calls disagree")
		}
	}
}

// TestRepeatedIDs: a repeated id is one member, at its first index.
func TestRepeatedIDs(t *testing.T) {
	g := &Group{Queues: queues(40), Consumers: []string{"a", "a", "b", "c", "c"}}
	owners := Assign(g, defaults())
	l := loads(owners, 5)
	if l[1] != 0 || l[4] != 0 {
		t.Fatalf("loads %v: repeated ids got queues", l)
	}
	if bound := Bound(40, 3, DefaultBalance); l[0] > bound || l[2] > bound || l[3] > bound {
		t.Fatalf("loads %v over bound %d", l, bound)
	}
}

func TestEmpty(t *testing.T) {
	if got := Assign(&Group{Consumers: []string{"a"}}, defaults()); len(got) != 0 {
		t.Fatalf("no queues: %v", got)
	}
	if got := Assign(&Group{Queues: queues(3)}, defaults()); !slices.Equal(got, []int{-1, -1, -1}) {
		t.Fatalf("no consumers: %v", got)
	}
}

// movement compares owners before and after a change and returns the queues moved, and those
// moved between two consumers present on both sides.
func movement(before, after []string, changed string) (moved, between int) {
	for i := range before {
		if before[i] != after[i] {
			moved++
			if before[i] != changed && after[i] != changed {
				between++
			}
		}
	}
	return moved, between
}

// TestJoinLeaveMovement: a leave moves exactly the leaver's queues; a join moves queues only to
// the newcomer, and only those the lower bound takes from members over it.
func TestJoinLeaveMovement(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 40 {
		n, m := 256, 16
		if round%2 == 1 {
			n, m = 1+rng.IntN(1000), 2+rng.IntN(40)
		}
		g := &Group{Queues: queues(n), Consumers: consumers(rng, m)}
		before := names(g, Assign(g, defaults()))

		leaver := g.Consumers[rng.IntN(m)]
		left := &Group{Queues: g.Queues, Consumers: slices.DeleteFunc(slices.Clone(g.Consumers), func(c string) bool { return c == leaver }), PrevOwners: before}
		after := names(left, Assign(left, defaults()))
		moved, between := movement(before, after, leaver)
		if want := strings.Count(strings.Join(before, "\x00")+"\x00", leaver+"\x00"); moved != want || between != 0 {
			t.Fatalf("round %d: leave of %q moved %d (want its %d queues), %d between stayers", round, leaver, moved, want, between)
		}

		joiner := "new@" + fmt.Sprint(round)
		joined := &Group{Queues: g.Queues, Consumers: append(slices.Clone(g.Consumers), joiner), PrevOwners: before}
		slices.Sort(joined.Consumers)
		after = names(joined, Assign(joined, defaults()))
		moved, between = movement(before, after, joiner)
		// What the new bound forces off members over it.
		bound := Bound(n, m+1, DefaultBalance)
		count := map[string]int{}
		for _, o := range before {
			count[o]++
		}
		shed := 0
		for _, c := range count {
			shed += max(0, c-bound)
		}
		if moved != shed {
			t.Fatalf("round %d (%d queues, %d consumers): join moved %d, the bound forces %d", round, n, m, moved, shed)
		}
		if forced := max(0, shed-bound); between > forced {
			t.Fatalf("round %d: join moved %d queues between stayers, only %d forced", round, between, forced)
		}
	}
}

func BenchmarkAssign(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	g := &Group{Queues: queues(2000), Consumers: consumers(rng, 300)}
	for b.Loop() {
		Assign(g, defaults())
	}
}

// kafkaGroups are the bench module's Kafka comparison: 1,024 queues of one topic, 64 members;
// "fresh" owns nothing, "steady" is the fresh plan with one member gone.
func kafkaGroups() (fresh, steady *Group) {
	rng := rand.New(rand.NewPCG(1, 1))
	qs := make([]abi.Queue, 1024)
	for i := range qs {
		qs[i] = abi.Queue{Topic: "t", QueueID: int32(i)}
	}
	fresh = &Group{Queues: qs, Consumers: consumers(rng, 64)}
	prev := names(fresh, Assign(fresh, defaults()))
	return fresh, &Group{Queues: qs, Consumers: fresh.Consumers[:63], PrevOwners: prev}
}

func BenchmarkAssign1024x64(b *testing.B) {
	g, steady := kafkaGroups()
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			Assign(g, defaults())
		}
	})
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			Assign(steady, defaults())
		}
	})
}
