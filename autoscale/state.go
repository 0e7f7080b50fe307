package autoscale

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// StateVersion is the version of the State format this package writes and reads.
const StateVersion = 1

// State is everything a Topic needs to resume after a restart, as plain data: encode it with
// encoding/json (or anything else) and hand it back to Restore. It holds the counts, the
// pending step with the clocks it waits on, the groups with their members and confirmations,
// and the offsets groups committed. It holds no max offsets (see ReportOffsets).
type State struct {
	Version    int      `json:"version"`
	Topic      string   `json:"topic"`
	Policy     Policy   `json:"policy"`
	Brokers    []Broker `json:"brokers"`
	Layout     uint64   `json:"layout"`
	Generation uint64   `json:"generation"`
	// Pending is the pending step; nil when idle.
	Pending *PendingState `json:"pending,omitempty"`
	// WriteLowSince is when the target fell below the write count (zero: it is not), and
	// WriteLowPeak the highest target since. ReadLowSince is the same for the read count.
	WriteLowSince time.Time `json:"writeLowSince,omitzero"`
	WriteLowPeak  int       `json:"writeLowPeak,omitempty"`
	ReadLowSince  time.Time `json:"readLowSince,omitzero"`
	// WriteDroppedAt is when a write count last dropped.
	WriteDroppedAt time.Time     `json:"writeDroppedAt,omitzero"`
	Groups         []GroupState  `json:"groups,omitempty"`
	Commits        []CommitState `json:"commits,omitempty"`
}

// PendingState is the pending step.
type PendingState struct {
	Phase      Phase     `json:"phase"`
	Generation uint64    `json:"generation"`
	Since      time.Time `json:"since"`
	// Due is when the step runs or is next checked, as NextDeadline said when State was
	// taken. It is there for people reading the record: Restore recomputes it from the clocks
	// and the policy, so a policy changed during the restart applies.
	Due time.Time `json:"due"`
	// Layout is, for a RaiseWrite, the layout the members must confirm.
	Layout uint64 `json:"layout,omitempty"`
	// Checks, LastCheck, Blockers and BlockedQueues record a LowerRead's drain checks.
	Checks        int       `json:"checks,omitempty"`
	LastCheck     time.Time `json:"lastCheck,omitzero"`
	Blockers      []Blocker `json:"blockers,omitempty"`
	BlockedQueues int       `json:"blockedQueues,omitempty"`
}

// GroupState is a group and its live members.
type GroupState struct {
	Name    string        `json:"name"`
	Model   Model         `json:"model"`
	Members []MemberState `json:"members,omitempty"`
}

// MemberState is a live member and the highest layout it confirmed (0: none).
type MemberState struct {
	ID     string `json:"id"`
	Layout uint64 `json:"layout,omitempty"`
}

// CommitState is a group's committed offset on a queue and when it last changed.
type CommitState struct {
	Group  string    `json:"group"`
	Broker string    `json:"broker"`
	Queue  int       `json:"queue"`
	Offset int64     `json:"offset"`
	Since  time.Time `json:"since"`
}

// State returns the topic's state, with every list sorted, so equal states encode to equal
// bytes.
func (t *Topic) State() State {
	s := State{
		Version:        StateVersion,
		Topic:          t.name,
		Policy:         t.policy,
		Brokers:        slices.Clone(t.brokers),
		Layout:         t.layout,
		Generation:     t.gen,
		ReadLowSince:   t.readLowSince,
		WriteDroppedAt: t.writeDroppedAt,
	}
	if t.writeLow != nil {
		s.WriteLowSince, s.WriteLowPeak = t.writeLow.since, t.writeLow.peak
	}
	if t.plan.phase != Idle {
		due, _ := t.NextDeadline()
		s.Pending = &PendingState{
			Phase:         t.plan.phase,
			Generation:    t.plan.gen,
			Since:         t.plan.since,
			Due:           due,
			Checks:        t.plan.checks,
			LastCheck:     t.plan.lastCheck,
			Blockers:      slices.Clone(t.plan.blockers),
			BlockedQueues: t.plan.blockedQueues,
		}
		if t.plan.phase == RaiseWrite {
			s.Pending.Layout = t.plan.layout
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.groups)) {
		g := t.groups[name]
		gs := GroupState{Name: name, Model: g.model}
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			gs.Members = append(gs.Members, MemberState{ID: id, Layout: g.members[id]})
		}
		s.Groups = append(s.Groups, gs)
	}
	for k, q := range t.queues {
		for group, c := range q.commits {
			s.Commits = append(s.Commits, CommitState{Group: group, Broker: k.broker, Queue: k.queue, Offset: c.offset, Since: c.since})
		}
	}
	slices.SortFunc(s.Commits, func(a, b CommitState) int {
		return compareBlockers(Blocker{Broker: a.Broker, Queue: a.Queue, Group: a.Group},
			Blocker{Broker: b.Broker, Queue: b.Queue, Group: b.Group})
	})
	return s
}

// Restore returns the Topic that State s describes, after checking that s is consistent. The
// next input resumes where s left off: a step whose due time passed during the restart runs
// then. Send Restore's Topic every group's membership again soon after: the copy in s only
// keeps the target steady until then.
func Restore(s State) (*Topic, error) {
	if s.Version != StateVersion {
		return nil, fmt.Errorf("autoscale: state version %d, want %d", s.Version, StateVersion)
	}
	t, err := New(s.Topic, s.Policy, s.Brokers)
	if err != nil {
		return nil, fmt.Errorf("autoscale: restoring topic %q: %w", s.Topic, err)
	}
	bad := func(format string, args ...any) (*Topic, error) {
		return nil, fmt.Errorf("autoscale: restoring topic %s: "+format, append([]any{s.Topic}, args...)...)
	}
	if s.Layout < 1 {
		return bad("layout %d, want at least 1", s.Layout)
	}
	t.layout, t.gen = s.Layout, s.Generation
	t.readLowSince, t.writeDroppedAt = s.ReadLowSince, s.WriteDroppedAt
	if !s.WriteLowSince.IsZero() {
		if s.WriteLowPeak < 0 {
			return bad("writeLowPeak %d is negative", s.WriteLowPeak)
		}
		t.writeLow = &window{since: s.WriteLowSince, peak: s.WriteLowPeak}
	}
	if p := s.Pending; p != nil {
		switch {
		case p.Phase == Idle || p.Phase > LowerRead:
			return bad("pending step in phase %s", p.Phase)
		case p.Generation == 0 || p.Generation > s.Generation:
			return bad("pending generation %d out of range [1,%d]", p.Generation, s.Generation)
		case p.Phase == RaiseWrite && (p.Layout < 1 || p.Layout > s.Layout):
			return bad("pending layout %d out of range [1,%d]", p.Layout, s.Layout)
		case p.Checks < 0 || p.BlockedQueues < 0:
			return bad("pending checks %d, blocked queues %d: negative", p.Checks, p.BlockedQueues)
		case p.Phase == LowerWrite && t.writeLow == nil:
			return bad("pending lower-write without writeLowSince")
		case p.Phase == LowerRead && s.ReadLowSince.IsZero():
			return bad("pending lower-read without readLowSince")
		}
		t.plan = plan{
			phase:         p.Phase,
			gen:           p.Generation,
			since:         p.Since,
			layout:        p.Layout,
			checks:        p.Checks,
			lastCheck:     p.LastCheck,
			blockers:      slices.Clone(p.Blockers),
			blockedQueues: p.BlockedQueues,
		}
	}
	for _, gs := range s.Groups {
		if gs.Name == "" {
			return bad("group with no name")
		}
		if _, dup := t.groups[gs.Name]; dup {
			return bad("group %s listed twice", gs.Name)
		}
		if gs.Model > Broadcasting {
			return bad("group %s: unknown message model %d", gs.Name, uint8(gs.Model))
		}
		g := &group{model: gs.Model, members: make(map[string]uint64, len(gs.Members))}
		for _, m := range gs.Members {
			if m.ID == "" {
				return bad("group %s: member with no id", gs.Name)
			}
			if _, dup := g.members[m.ID]; dup {
				return bad("group %s: member %s listed twice", gs.Name, m.ID)
			}
			if m.Layout > s.Layout {
				return bad("group %s: member %s confirmed layout %d, newer than layout %d", gs.Name, m.ID, m.Layout, s.Layout)
			}
			g.members[m.ID] = m.Layout
		}
		t.groups[gs.Name] = g
	}
	for _, c := range s.Commits {
		i, ok := t.broker(c.Broker)
		switch {
		case c.Group == "":
			return bad("commit on %s/%d with no group", c.Broker, c.Queue)
		case !ok:
			return bad("commit of group %s on unknown broker %q", c.Group, c.Broker)
		case c.Queue < 0 || c.Queue >= t.brokers[i].Read:
			return bad("commit of group %s on %s queue %d out of range [0,%d)", c.Group, c.Broker, c.Queue, t.brokers[i].Read)
		}
		key := queueKey{c.Broker, c.Queue}
		q := t.queues[key]
		if q == nil {
			q = &queueOffsets{max: -1, commits: make(map[string]commit)}
			t.queues[key] = q
		}
		if _, dup := q.commits[c.Group]; dup {
			return bad("commit of group %s on %s/%d listed twice", c.Group, c.Broker, c.Queue)
		}
		q.commits[c.Group] = commit{offset: c.Offset, since: c.Since}
	}
	t.target, _, _ = t.computeTarget()
	return t, nil
}

// String summarises s on one line, for logs.
func (s State) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topic %s layout %d gen %d", s.Topic, s.Layout, s.Generation)
	for _, br := range s.Brokers {
		fmt.Fprintf(&b, " %s=%d/%d", br.Name, br.Read, br.Write)
	}
	if s.Pending != nil {
		fmt.Fprintf(&b, " pending %s gen %d due %s", s.Pending.Phase, s.Pending.Generation, stamp(s.Pending.Due))
	}
	return b.String()
}
