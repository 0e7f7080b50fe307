package coordinator

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// The status views are package model's, shared with the Go client.
type (
	GroupStatus  = model.GroupStatus
	MemberStatus = model.MemberStatus
	TopicStatus  = model.TopicStatus
	GroupSummary = model.GroupSummary
	TopicSummary = model.TopicSummary
	Preview      = model.Preview
	TopicPreview = model.TopicPreview
	Move         = model.Move
	Count        = model.Count
)

// Group returns a group's status.
func (c *Coordinator) Group(name string) (GroupStatus, error) {
	if err := CheckName("group", name); err != nil {
		return GroupStatus{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[name]
	if !ok {
		return GroupStatus{}, notFound("group %q not found", name)
	}
	now := c.clock.Now()
	s := GroupStatus{Group: cloneGroup(g.cfg), State: model.StateStable, Members: make([]MemberStatus, 0, len(g.members)), Topics: map[string]TopicStatus{}}
	for _, m := range g.members {
		ms := MemberStatus{
			CID: m.cid, InstanceID: m.instance, Topics: slices.Clone(m.topics), Labels: maps.Clone(m.labels),
			LastHeartbeat: m.lastSeen.UTC(), Generations: maps.Clone(m.applied), Confirms: m.confirms,
		}
		if ms.Topics == nil {
			ms.Topics = []string{}
		}
		if ms.Generations == nil {
			ms.Generations = map[string]int64{}
		}
		s.Members = append(s.Members, ms)
	}
	slices.SortFunc(s.Members, func(a, b MemberStatus) int { return strings.Compare(a.CID, b.CID) })
	for name, st := range g.topics {
		ts := TopicStatus{Assignment: map[string][]abi.Queue{}, Pending: st.dirty, Held: st.dirty && c.held(g, st, now),
			Error: st.lastErr, Failures: st.failures}
		if st.lastErr != "" {
			at := st.lastErrAt.UTC()
			ts.ErrorAt = &at
		}
		if st.gen != nil {
			ts.Generation = st.gen.Number
			ts.Plugin, ts.PluginVersion = st.gen.Plugin, st.gen.PluginVersion
			at := st.gen.At
			ts.PublishedAt = &at
			ts.Assignment = byCID(st.gen.Assignment, st.gen.CIDs)
			ts.Handoffs = handoffsByCID(st.gen)
		}
		ts.State = c.stateOf(g, st, now)
		ts.Offsets, ts.Lag = lagOf(st)
		s.State = s.State.Worse(ts.State)
		s.Topics[name] = ts
	}
	return s, nil
}

// Groups lists every group, sorted by name.
func (c *Coordinator) Groups() []GroupSummary {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupSummary, 0, len(c.groups))
	now := c.clock.Now()
	for _, g := range c.groups {
		gs := GroupSummary{Group: cloneGroup(g.cfg), Members: len(g.members), State: model.StateStable, Topics: make(map[string]TopicSummary, len(g.topics))}
		for name, st := range g.topics {
			ts := TopicSummary{State: c.stateOf(g, st, now)}
			if st.gen != nil {
				ts.Generation = st.gen.Number
			}
			_, ts.Lag = lagOf(st)
			gs.State = gs.State.Worse(ts.State)
			gs.Lag = addLag(gs.Lag, ts.Lag)
			gs.Topics[name] = ts
		}
		out = append(out, gs)
	}
	slices.SortFunc(out, func(a, b GroupSummary) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func cloneGroup(g Group) Group {
	g.Config = maps.Clone(g.Config)
	return g
}

// byCID rekeys an assignment from member keys to client ids.
func byCID(assign map[string][]abi.Queue, cids map[string]string) map[string][]abi.Queue {
	out := make(map[string][]abi.Queue, len(assign))
	for key, qs := range assign {
		cid := cids[key]
		if cid == "" {
			cid = key
		}
		out[cid] = qs
	}
	return out
}

// Preview computes what binding b would assign on the group's live members, for every topic
// the group has, and compares it with the generations in force. Nothing changes.
func (c *Coordinator) Preview(ctx context.Context, groupName string, b Binding) (Preview, error) {
	if err := CheckName("group", groupName); err != nil {
		return Preview{}, err
	}
	b, err := normalizeBinding(b)
	if err != nil {
		return Preview{}, err
	}
	if b.Strategy != "" && c.opts.CheckStrategy != nil {
		if err := c.opts.CheckStrategy(b.Strategy); err != nil {
			return Preview{}, invalid("strategy %q: %v", b.Strategy, err)
		}
	}
	c.mu.Lock()
	g, ok := c.groups[groupName]
	if !ok {
		c.mu.Unlock()
		return Preview{}, notFound("group %q not found", groupName)
	}
	type item struct {
		j       *job
		current map[string][]abi.Queue
		number  int64
	}
	var items []item
	for _, st := range g.topics {
		it := item{j: c.snapshot(g, st, b), current: map[string][]abi.Queue{}}
		if st.gen != nil {
			it.current, it.number = byCID(st.gen.Assignment, st.gen.CIDs), st.gen.Number
		}
		items = append(items, it)
	}
	c.mu.Unlock()

	jobs := make([]*job, len(items))
	for i, it := range items {
		jobs[i] = it.j
	}
	c.run(ctx, jobs)
	p := Preview{Binding: b, Topics: make(map[string]TopicPreview, len(items))}
	for _, it := range items {
		tp := TopicPreview{Generation: it.number, Current: it.current, Proposed: map[string][]abi.Queue{}, Moves: []Move{}, Counts: map[string]Count{}}
		if it.j.err != nil {
			tp.Error = it.j.err.Error()
		} else {
			tp.Proposed = byCID(it.j.result, it.j.cids)
			tp.Moves, tp.Counts = diff(tp.Current, tp.Proposed)
		}
		p.Topics[it.j.st.name] = tp
	}
	return p, nil
}

// diff lists the queues whose owner differs between two assignments, and each member's counts.
func diff(current, proposed map[string][]abi.Queue) ([]Move, map[string]Count) {
	owners := func(a map[string][]abi.Queue) map[abi.Queue]string {
		o := map[abi.Queue]string{}
		for cid, qs := range a {
			for _, q := range qs {
				o[q] = cid
			}
		}
		return o
	}
	before, after := owners(current), owners(proposed)
	var qs []abi.Queue
	for q := range before {
		qs = append(qs, q)
	}
	for q := range after {
		if _, ok := before[q]; !ok {
			qs = append(qs, q)
		}
	}
	slices.SortFunc(qs, abi.CompareQueues)
	moves := []Move{}
	for _, q := range qs {
		if before[q] != after[q] {
			moves = append(moves, Move{Queue: q, From: before[q], To: after[q]})
		}
	}
	counts := map[string]Count{}
	for cid, qs := range current {
		c := counts[cid]
		c.Current = len(qs)
		counts[cid] = c
	}
	for cid, qs := range proposed {
		c := counts[cid]
		c.Proposed = len(qs)
		counts[cid] = c
	}
	return moves, counts
}
