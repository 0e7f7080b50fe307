package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
)

// The holders a handoff waits for are, in key order, those with queues that waitsFor names:
// live members that confirm, and anyone during the restart grace. Picked from the group's
// members in key order past the grace, they are the same keys as sorting the holdings' gives.
func TestWaitingHoldersInKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := []abi.Queue{{Topic: "T", BrokerName: "b", QueueID: 1}}
	for round := range 200 {
		c := &Coordinator{}
		if round%3 == 0 {
			c.graceUntil = now.Add(time.Minute)
		}
		g := &group{members: map[string]*member{}, keys: map[string]*member{}}
		st := &topicState{}
		for i := range 30 {
			key := fmt.Sprintf("k%02d", r.IntN(40))
			switch r.IntN(4) {
			case 0: // a holder that is not a member (it left)
			case 1: // a member that does not confirm
				m := &member{cid: fmt.Sprintf("c%d", i), key: key}
				if g.keys[key] == nil {
					g.keys[key] = m
				}
				g.addMember(m)
			default:
				m := &member{cid: fmt.Sprintf("c%d", i), key: key, confirms: true}
				if g.keys[key] == nil {
					g.keys[key] = m
				}
				g.addMember(m)
			}
			if r.IntN(4) > 0 {
				h := st.ho.holding(key)
				if r.IntN(5) > 0 {
					h.add(q)
				}
			}
		}
		var want []string
		for key, h := range st.ho.holds {
			if len(h.lists) > 0 && c.waitsFor(g, key, now) {
				want = append(want, key)
			}
		}
		slices.Sort(want)
		if got := c.waitingHolders(g, st, now); !slices.Equal(got, want) {
			t.Fatalf("round %d: waiting holders %v, want %v", round, got, want)
		}
	}
}
