package nearby_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/plugins/nearby"
)

// group is a test group: queue i of room qRooms[i] ("-" for none), consumer j of cRooms[j].
type group struct {
	qRooms, cRooms []string
}

func (g group) input() nearby.Input {
	room := func(r string) (string, bool) { return r, r != "-" }
	return nearby.Input{
		N: len(g.qRooms), C: len(g.cRooms),
		Queue:        func(i int) (string, string, int32) { return "T", "broker-" + g.qRooms[i], int32(i) },
		Consumer:     func(j int) string { return fmt.Sprintf("c%02d", j) },
		QueueRoom:    func(i int) (string, bool) { return room(g.qRooms[i]) },
		ConsumerRoom: func(j int) (string, bool) { return room(g.cRooms[j]) },
	}
}

func mustInner(t *testing.T, name, vnodes string) nearby.Inner {
	t.Helper()
	in, err := nearby.ParseInner(name, vnodes)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func answers(t *testing.T, g group, inner nearby.Inner) [][]int {
	t.Helper()
	ng := nearby.New(g.input(), inner)
	out := make([][]int, len(g.cRooms))
	for j := range out {
		got, err := ng.Allocate(nil, j)
		if err != nil {
			t.Fatalf("consumer %d: %v", j, err)
		}
		out[j] = got
	}
	return out
}

// TestOrphanRoomsSkew is apache/rocketmq #2443: rooms A and B have 3 queues each and no consumer,
// room C has the 4 consumers and no queue. Each orphan room is split on its own, so under AVG the
// fourth consumer never gets any of the 6 queues.
func TestOrphanRoomsSkew(t *testing.T) {
	g := group{qRooms: []string{"A", "A", "A", "B", "B", "B"}, cRooms: []string{"C", "C", "C", "C"}}
	want := [][]int{{0, 3}, {1, 4}, {2, 5}, {}}
	if got := answers(t, g, mustInner(t, "averagely", "")); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestOwnRoomFirstThenOrphansInJavaOrder: a consumer's own room's share comes first, then the
// orphan rooms' in String.compareTo order ("🏠" before "～", the reverse of Go's byte order); it
// never gets queues of another room that has consumers; a room of spaces is a room.
func TestOwnRoomFirstThenOrphansInJavaOrder(t *testing.T) {
	g := group{
		qRooms: []string{"～", "🏠", "a", "a", "b", " ", " "},
		cRooms: []string{"b", "a", " "},
	}
	got := answers(t, g, mustInner(t, "circle", ""))
	// Orphans: "🏠" (queue 1) then "～" (queue 0), each dealt over all three consumers.
	want := [][]int{{4, 1, 0}, {2, 3}, {5, 6}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestMissingRooms(t *testing.T) {
	for _, c := range []struct {
		g    group
		want string
	}{
		{group{[]string{"a", "-", ""}, []string{"-"}}, "Machine room is null for mq MessageQueue [topic=T, brokerName=broker--, queueId=1]"},
		{group{[]string{"a", "", "-"}, []string{"a"}}, "Machine room is null for mq MessageQueue [topic=T, brokerName=broker-, queueId=1]"},
		{group{[]string{"a", "a"}, []string{"a", "-", ""}}, "Machine room is null for consumer id c01"},
		{group{[]string{"a"}, []string{""}}, "Machine room is null for consumer id c00"},
	} {
		ng := nearby.New(c.g.input(), mustInner(t, "", ""))
		for j := range c.g.cRooms {
			if _, err := ng.Allocate(nil, j); err == nil || err.Error() != c.want {
				t.Errorf("%v, consumer %d: err = %v, want %q", c.g, j, err, c.want)
			}
		}
		if ng.Err() == nil {
			t.Errorf("%v: Err() = nil", c.g)
		}
	}
	// Spaces and tabs are rooms.
	if got := answers(t, group{[]string{" ", "\t"}, []string{"\t"}}, mustInner(t, "", "")); !slices.Equal(got[0], []int{1, 0}) {
		t.Fatalf("whitespace rooms: %v", got)
	}
}

func TestParseInner(t *testing.T) {
	for name, want := range map[string]string{"": "averagely", "averagely": "averagely", "AVG": "averagely", "circle": "circle",
		"AVG_BY_CIRCLE": "circle", "hash": "hash", "CONSISTENT_HASH": "hash"} {
		if in, err := nearby.ParseInner(name, ""); err != nil || in.Name() != want {
			t.Errorf("ParseInner(%q) = %v, %v; want %s", name, in.Name(), err, want)
		}
	}
	if _, err := nearby.ParseInner("sticky", ""); err == nil || !strings.Contains(err.Error(), `"inner" is "sticky"`) {
		t.Errorf("unknown inner: %v", err)
	}
	if _, err := nearby.ParseInner("hash", "-1"); err == nil || err.Error() != "illegal virtualNodeCnt :-1" {
		t.Errorf("negative vnodes: %v", err)
	}
	if _, err := nearby.ParseInner("averagely", "-1"); err != nil {
		t.Errorf("vnodes are hash's only: %v", err)
	}
	// vnodes reach the ring: none gives nobody anything, as Java's CONSISTENT_HASH with 0.
	g := group{qRooms: []string{"a", "a", "b"}, cRooms: []string{"a", "a"}}
	for _, a := range answers(t, g, mustInner(t, "hash", "0")) {
		if len(a) != 0 {
			t.Fatalf("vnodes 0: %v", a)
		}
	}
}

// TestEveryQueueOnceAndNearby: over random groups, for each inner strategy, every queue is given
// exactly once across the group, and a queue of a room with consumers goes to one of them.
func TestEveryQueueOnceAndNearby(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rooms := []string{"IDC10", "IDC2", "🏠", "～", " ", "zone-é"}
	for round := range 300 {
		g := group{qRooms: make([]string, 1+rng.IntN(60)), cRooms: make([]string, 1+rng.IntN(12))}
		k := 1 + rng.IntN(len(rooms))
		for i := range g.qRooms {
			g.qRooms[i] = rooms[rng.IntN(k)]
		}
		for j := range g.cRooms {
			g.cRooms[j] = rooms[rng.IntN(k)]
		}
		for _, inner := range []string{"averagely", "circle", "hash"} {
			owner := make([]int, len(g.qRooms))
			for i := range owner {
				owner[i] = -1
			}
			for j, a := range answers(t, g, mustInner(t, inner, "")) {
				for _, q := range a {
					if owner[q] >= 0 {
						t.Fatalf("round %d %s: queue %d to %d and %d", round, inner, q, owner[q], j)
					}
					owner[q] = j
				}
			}
			for i, o := range owner {
				if o < 0 {
					t.Fatalf("round %d %s: queue %d to nobody (%v)", round, inner, i, g)
				}
				if slices.Contains(g.cRooms, g.qRooms[i]) && g.cRooms[o] != g.qRooms[i] {
					t.Fatalf("round %d %s: queue %d of room %q to consumer %d of room %q", round, inner, i, g.qRooms[i], o, g.cRooms[o])
				}
			}
		}
	}
}
