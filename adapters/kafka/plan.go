package kafka

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/abi"
)

// assignment is a plan for a group's partitions: each partition's owner as an index into the
// group's members, -1 for none. It is its own kgo.IntoSyncAssignment, so that a plan goes from
// the plugin's answer to the SyncGroup request through slices, with no map per member and
// partition (kgo.BalancePlan's representation).
type assignment struct {
	g      *view
	owners [][]int32 // parallel to g.topics
}

// nobody returns, for each count, a slice of that many -1s, all in one array.
func nobody(counts []int32) [][]int32 {
	n := 0
	for _, c := range counts {
		n += int(c)
	}
	all := make([]int32, n)
	for i := range all {
		all[i] = -1
	}
	out := make([][]int32, len(counts))
	for t, c := range counts {
		out[t], all = all[:c:c], all[c:]
	}
	return out
}

func newPlan(g *view) *assignment { return &assignment{g: g, owners: nobody(g.counts)} }

// take records the plugin's answer for the topics ts (positions in g.topics, the request's
// queues in that order) among the members who (req.Consumers in that order).
func (p *assignment) take(ts []int, who []int, resp *abi.Response) error {
	total := 0
	for _, t := range ts {
		total += int(p.g.counts[t])
	}
	owners := resp.Owners // each queue's owner as an index into who
	if owners == nil {    // the list form: one list of queue indices per consumer
		owners = make([]int32, total)
		for i := range owners {
			owners[i] = abi.NoOwner
		}
		for c, res := range resp.Results {
			for _, q := range res.Indices {
				if q < 0 || q >= total {
					return fmt.Errorf("named queue %d of %d", q, total)
				}
				owners[q] = int32(c)
			}
		}
	}
	if len(owners) != total {
		return fmt.Errorf("named owners of %d queues, not %d", len(owners), total)
	}
	q := 0
	for _, t := range ts {
		own := p.owners[t]
		for i := range own {
			c := owners[q]
			q++
			if c < 0 || int(c) >= len(who) {
				return fmt.Errorf("left partition %s/%d without an owner", p.g.topics[t], i)
			}
			own[i] = int32(who[c])
		}
	}
	return nil
}

// intended is a plan by consumer id, kept from one rebalance to the next.
type intended struct {
	ids    []string           // the plan's members' consumer ids
	owners map[string][]int32 // topic => partition => index into ids, -1 for none
}

// intended is the plan by consumer id.
func (p *assignment) intended() *intended {
	in := &intended{ids: make([]string, len(p.g.members)), owners: make(map[string][]int32, len(p.g.topics))}
	for i, m := range p.g.members {
		in.ids[i] = m.id
	}
	for t, own := range p.owners {
		in.owners[p.g.topics[t]] = slices.Clone(own)
	}
	return in
}

// Flags of a partition in adjustCooperative.
const (
	claimed = 1 << iota // some member claims it
	held                // its planned owner claims it, and no claim elsewhere has a higher generation
	revoked             // a member other than its planned owner claims it
)

// adjustCooperative holds back each partition that moves to a member from another member that
// still claims it: the claimant revokes it first, and the next rebalance places it (KIP-429).
// A planned owner's own claim counts only if no other claim on the partition has a strictly
// higher generation (KIP-792: a member that missed rebalances may still claim a partition that
// has moved on). This is kgo's BalancePlan.AdjustCooperative on slices instead of maps;
// TestAdjustCooperativeAsKgo holds the two equal. It returns how many partitions it held back.
func (p *assignment) adjustCooperative() (heldBack int) {
	g := p.g
	if len(g.claims) == 0 {
		return 0
	}
	base := make([]int, len(g.topics)+1)
	for t, c := range g.counts {
		base[t+1] = base[t] + int(c)
	}
	maxGen := make([]int32, base[len(g.topics)])
	flags := make([]uint8, len(maxGen))
	for _, c := range g.claims {
		at := base[c.topic] + int(c.partition)
		if gen := g.members[c.member].gen; flags[at]&claimed == 0 || gen > maxGen[at] {
			maxGen[at] = gen
		}
		flags[at] |= claimed
	}
	for _, c := range g.claims {
		at := base[c.topic] + int(c.partition)
		if p.owners[c.topic][c.partition] != c.member {
			flags[at] |= revoked
		} else if g.members[c.member].gen >= maxGen[at] {
			flags[at] |= held
		}
	}
	for t, own := range p.owners {
		for i, o := range own {
			if f := flags[base[t]+i]; o >= 0 && f&revoked != 0 && f&held == 0 {
				own[i] = -1
				heldBack++
			}
		}
	}
	return heldBack
}

// IntoSyncAssignment is the plan as the SyncGroup request carries it: one consumer member
// assignment per member (an empty one for a member with nothing), topics sorted, partitions
// ascending, members sorted by member id, as kgo.BalancePlan writes it.
func (p *assignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	g := p.g
	m := len(g.members)
	// Each member's partitions, (topic, partition) ascending, in one array: start[i] is where
	// member i's run begins.
	start := make([]int, m+1)
	for _, own := range p.owners {
		for _, o := range own {
			if o >= 0 {
				start[o+1]++
			}
		}
	}
	for i := range m {
		start[i+1] += start[i]
	}
	parts := make([]int32, start[m])
	topicOf := make([]int32, start[m])
	fill := slices.Clone(start[:m])
	for t, own := range p.owners {
		for i, o := range own {
			if o >= 0 {
				parts[fill[o]], topicOf[fill[o]] = int32(i), int32(t)
				fill[o]++
			}
		}
	}
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(g.members[a].m.MemberID, g.members[b].m.MemberID) })
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, m)
	var topics []kmsg.ConsumerMemberAssignmentTopic
	var buf []byte
	for _, i := range order {
		topics = topics[:0]
		for j := start[i]; j < start[i+1]; {
			k := j
			for k < start[i+1] && topicOf[k] == topicOf[j] {
				k++
			}
			topics = append(topics, kmsg.ConsumerMemberAssignmentTopic{Topic: g.topics[topicOf[j]], Partitions: parts[j:k:k]})
			j = k
		}
		var a kmsg.ConsumerMemberAssignment
		if len(topics) > 0 {
			a.Topics = topics
		}
		from := len(buf)
		buf = a.AppendTo(buf)
		s := kmsg.NewSyncGroupRequestGroupAssignment()
		s.MemberID = g.members[i].m.MemberID
		s.MemberAssignment = buf[from:len(buf):len(buf)]
		out = append(out, s)
	}
	return out
}
