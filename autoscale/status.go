package autoscale

import (
	"fmt"
	"slices"
	"time"
)

// Status is what `GET /v1/topics/{topic}` shows of auto-scaling: the counts, the target and
// why, and the pending step and why it waits.
type Status struct {
	Topic   string   `json:"topic"`
	Enabled bool     `json:"enabled"`
	Brokers []Broker `json:"brokers"`
	Target  int      `json:"target"`
	// Group is the clustering group that sets the target, and GroupSize its live members.
	// Group is empty when no clustering group has live members.
	Group     string `json:"group,omitempty"`
	GroupSize int    `json:"groupSize"`
	// Reason explains the target in words, e.g. "largest clustering group g1 has 1 live
	// members, raised to min 2".
	Reason     string `json:"reason"`
	Layout     uint64 `json:"layout"`
	Generation uint64 `json:"generation"`
	// Pending is the step the topic waits to take; nil when idle.
	Pending *Pending `json:"pending,omitempty"`
}

// Pending describes the pending step.
type Pending struct {
	Phase      Phase     `json:"phase"`
	Kind       StepKind  `json:"kind"`
	To         int       `json:"to"` // the count it would set if it ran now
	Generation uint64    `json:"generation"`
	Since      time.Time `json:"since"` // when it was planned
	Due        time.Time `json:"due"`   // when it runs, or is next checked (NextDeadline)
	Wait       string    `json:"wait"`  // why it waits, in one sentence
	// Unconfirmed lists ("group/member") the members a RaiseWrite still waits for.
	Unconfirmed []string `json:"unconfirmed,omitempty"`
	// Checks counts the drain checks a LowerRead made; LastCheck is the last one's time and
	// Blockers what it found (at most 16; BlockedQueues counts every blocked queue).
	Checks        int       `json:"checks,omitempty"`
	LastCheck     time.Time `json:"lastCheck,omitzero"`
	Blockers      []Blocker `json:"blockers,omitempty"`
	BlockedQueues int       `json:"blockedQueues,omitempty"`
}

// Status returns the topic's status.
func (t *Topic) Status() Status {
	z := t.sizing()
	target := z.target
	s := Status{
		Topic:      t.name,
		Enabled:    t.policy.Enabled,
		Brokers:    slices.Clone(t.brokers),
		Target:     target,
		Group:      z.largest,
		GroupSize:  z.size,
		Reason:     z.why(),
		Layout:     t.layout,
		Generation: t.gen,
	}
	if t.plan.phase == Idle {
		return s
	}
	p := t.policy
	due, _ := t.NextDeadline()
	pd := &Pending{
		Phase:      t.plan.phase,
		Kind:       t.plan.phase.stepKind(),
		To:         target,
		Generation: t.plan.gen,
		Since:      t.plan.since,
		Due:        due,
	}
	switch t.plan.phase {
	case RaiseWrite:
		pd.Unconfirmed = t.unconfirmed(t.plan.layout)
		delayEnd := t.plan.since.Add(p.ExpandWriteDelay)
		switch {
		case len(pd.Unconfirmed) == 0:
			pd.Wait = fmt.Sprintf("waits expandWriteDelay %s from when it was planned, until %s, so consumers attach to the new queues before producers write to them",
				formatDuration(p.ExpandWriteDelay), stamp(delayEnd))
		default:
			pd.Wait = fmt.Sprintf("waits for %s to confirm layout %d (%s); proceeds without them at %s (maxConfirmWait %s)",
				plural(len(pd.Unconfirmed), "member"), t.plan.layout, listSome(pd.Unconfirmed, 10), stamp(due), formatDuration(p.MaxConfirmWait))
		}
	case LowerWrite:
		pd.To = t.writeLow.peak
		pd.Wait = fmt.Sprintf("waits until the target has stayed at or below %d for shrinkStableFor %s, until %s",
			pd.To, formatDuration(p.ShrinkStableFor), stamp(due))
	case LowerRead:
		pd.Checks, pd.LastCheck = t.plan.checks, t.plan.lastCheck
		pd.Blockers, pd.BlockedQueues = slices.Clone(t.plan.blockers), t.plan.blockedQueues
		if t.plan.checks == 0 {
			pd.Wait = fmt.Sprintf("waits until %s (%s), then checks that the queues from %d up are drained",
				stamp(due), t.lowerReadClock(), target)
		} else {
			first := ""
			if len(t.plan.blockers) > 0 {
				first = ", first " + t.plan.blockers[0].String()
			}
			pd.Wait = fmt.Sprintf("%s not drained at check %d (%s)%s; checks again at %s, until drained",
				plural(t.plan.blockedQueues, "queue"), t.plan.checks, stamp(t.plan.lastCheck), first, stamp(due))
		}
	}
	s.Pending = pd
	return s
}

// NextDeadline returns when Tick next has something to do, and false when nothing is pending
// (only a new input can change that). The daemon re-arms its timer for the topic after every
// input. A Tick at the deadline always acts (takes a step, or records a failed drain check and
// moves the deadline on), so the timer never spins.
func (t *Topic) NextDeadline() (time.Time, bool) {
	p := t.policy
	switch t.plan.phase {
	case RaiseWrite:
		if t.allConfirmed(t.plan.layout) {
			return t.plan.since.Add(p.ExpandWriteDelay), true
		}
		// Validate keeps MaxConfirmWait >= ExpandWriteDelay; a confirmation that completes the
		// set earlier arrives as an input, which runs the step itself.
		return t.plan.since.Add(p.MaxConfirmWait), true
	case LowerWrite:
		if t.writeLow != nil {
			return t.writeLow.since.Add(p.ShrinkStableFor), true
		}
	case LowerRead:
		return t.lowerReadDue(), true
	}
	return time.Time{}, false
}
