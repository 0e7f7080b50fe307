package coordinator

import (
	"slices"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// QueueLag is one queue's last reported offsets, as the group status shows them.
type QueueLag = model.QueueLag

// lagReport is the last offsets one member reported for one queue.
type lagReport struct {
	committed, max int64
	cid            string
	at             time.Time
}

// recordLag keeps the offsets a member's heartbeat reports for the queues it owns in the
// generation in force, of every topic it subscribes: the group status shows them as lag. Reports
// of queues the member does not own are ignored, so what is kept is bounded by the topics'
// queue counts. Caller holds c.mu.
func recordLag(g *group, m *member, offsets map[string][]QueueOffset, now time.Time) {
	for topic, offs := range offsets {
		st := g.topics[topic]
		if st == nil || st.gen == nil {
			continue
		}
		owned := st.gen.Assignment[m.key]
		if len(owned) == 0 {
			continue
		}
		if st.offsets == nil {
			st.offsets = map[abi.Queue]lagReport{}
		}
		for _, o := range offs {
			q := abi.Queue{Topic: topic, BrokerName: o.BrokerName, QueueID: o.QueueID}
			if !slices.Contains(owned, q) {
				continue
			}
			st.offsets[q] = lagReport{committed: o.Committed, max: o.Max, cid: m.cid, at: now}
		}
	}
}

// lagOf lists the kept offsets of the queues of the generation in force, sorted, with the sum
// of the known lags (nil when none is known). Reports of queues the generation no longer has
// are dropped. Caller holds c.mu.
func lagOf(st *topicState) ([]QueueLag, *int64) {
	if len(st.offsets) == 0 || st.gen == nil {
		return nil, nil
	}
	inForce := make(map[abi.Queue]bool, len(st.offsets))
	for _, qs := range st.gen.Assignment {
		for _, q := range qs {
			if _, ok := st.offsets[q]; ok {
				inForce[q] = true
			}
		}
	}
	var out []QueueLag
	var total *int64
	for q, r := range st.offsets {
		if !inForce[q] {
			delete(st.offsets, q)
			continue
		}
		ql := QueueLag{Queue: q, Committed: r.committed, Max: r.max, Member: r.cid, At: r.at.UTC()}
		if r.committed >= 0 && r.max >= 0 {
			lag := max(r.max-r.committed, 0)
			ql.Lag = &lag
			if total == nil {
				total = new(int64)
			}
			*total += lag
		}
		out = append(out, ql)
	}
	slices.SortFunc(out, func(a, b QueueLag) int { return abi.CompareQueues(a.Queue, b.Queue) })
	return out, total
}

// stateOf is a topic's state; a subscription to a topic not declared yet is stable: there is
// nothing to compute until it is. Caller holds c.mu.
func (c *Coordinator) stateOf(g *group, st *topicState, now time.Time) model.GroupState {
	switch {
	case c.pending(st):
		return model.StateStable
	case st.lastErr != "":
		return model.StatePluginFailing
	case st.dirty && c.held(g, st, now):
		return model.StateHeld
	case st.dirty || (st.gen != nil && st.gen.Handoffs.Len() > 0):
		return model.StateRebalancing
	}
	return model.StateStable
}

// addLag adds b to a, either nil when unknown.
func addLag(a, b *int64) *int64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		v := *b
		return &v
	}
	v := *a + *b
	return &v
}
