package autoscale

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

type queueKey struct {
	broker string
	queue  int
}

// queueOffsets is what is known of one queue.
type queueOffsets struct {
	// max is the highest max offset reported, -1 while none was. Max offsets only grow, so a
	// lower report is an older one.
	max int64
	// maxSince is when max was first reported at its current value, so the message at max-1
	// was written before it. It stands in for lastWrite when no report carried one.
	maxSince time.Time
	// lastWrite is the store time of the message at max-1, when a report carried it.
	lastWrite time.Time
	commits   map[string]commit // by group
}

// commit is a group's committed offset on a queue and when it last changed. A group counts
// for the queue while since is within OffsetRetention, so a dead group's frozen offset stops
// blocking once retention passes, while an offset a broker keeps re-reporting does not
// refresh it.
type commit struct {
	offset int64
	since  time.Time
}

// Blocker is one reason a queue to remove is not drained.
type Blocker struct {
	Broker string `json:"broker"`
	Queue  int    `json:"queue"`
	// Group is the group that has not caught up; empty when the queue itself is the reason
	// (max offset unknown, written too recently).
	Group string `json:"group,omitempty"`
	// Behind is how many messages Group has not committed: max offset minus committed
	// offset; -1 when its committed offset is unknown; 0 for a queue-level reason.
	Behind int64  `json:"behind,omitempty"`
	Reason string `json:"reason"`
}

func (b Blocker) String() string {
	if b.Group == "" {
		return fmt.Sprintf("%s/%d %s", b.Broker, b.Queue, b.Reason)
	}
	return fmt.Sprintf("%s/%d group %s %s", b.Broker, b.Queue, b.Group, b.Reason)
}

// maxBlockers bounds the blockers kept for Status and logs; the count of blocked queues is
// always exact.
const maxBlockers = 16

// ReportOffsets records offsets of the topic's queues as group saw them (its committed
// offsets, and the max offsets its members read), or, for an empty group, a broker's max
// offsets. Reports about brokers the topic does not have, or queues at or above a broker's
// read count, are ignored: nothing is decided about those queues. A broadcasting group's
// committed offsets are ignored too: they are per member, not per group (fault A.11.4).
//
// Max offsets are kept in memory only and never persisted, because a max offset from before a
// restart could be lower than the truth and make a queue look drained; after Restore a queue
// counts as not drained until its max offset is reported again.
func (t *Topic) ReportOffsets(now time.Time, group string, offsets []Offset) (Output, error) {
	for _, o := range offsets {
		if o.Broker == "" {
			return Output{}, fmt.Errorf("autoscale: offset report of group %q: queue %d with no broker", group, o.Queue)
		}
		if o.Queue < 0 || o.Queue >= MaxQueues {
			return Output{}, fmt.Errorf("autoscale: offset report of group %q: broker %s queue %d out of range [0,%d)",
				group, o.Broker, o.Queue, MaxQueues)
		}
	}
	t.begin()
	broadcasting := false
	if g := t.groups[group]; g != nil && g.model == Broadcasting {
		broadcasting = true
	}
	for _, o := range offsets {
		i, ok := t.broker(o.Broker)
		if !ok || o.Queue >= t.brokers[i].Read {
			continue
		}
		key := queueKey{o.Broker, o.Queue}
		q := t.queues[key]
		if q == nil {
			q = &queueOffsets{max: -1}
			t.queues[key] = q
		}
		switch {
		case o.Max > q.max:
			q.max, q.maxSince, q.lastWrite = o.Max, now, o.LastWrite
		case o.Max == q.max && o.LastWrite.After(q.lastWrite):
			q.lastWrite = o.LastWrite
		}
		if group == "" || broadcasting || o.Committed < 0 {
			continue
		}
		c, seen := q.commits[group]
		if seen && c.offset == o.Committed {
			continue
		}
		if q.commits == nil {
			q.commits = make(map[string]commit)
		}
		q.commits[group] = commit{offset: o.Committed, since: now}
		if !seen {
			// Which groups committed where is what makes an offline group count after a
			// restart; how far they got may lag (an older offset only blocks longer).
			t.dirty = true
		}
	}
	t.reconcile(now)
	return t.end(), nil
}

// drainCheck checks every queue a read drop to target would remove, on every broker, and
// returns the first maxBlockers reasons (sorted) and how many queues are blocked.
//
// A queue is drained when its max offset is known, its last write is older than DrainQuietFor,
// and every group that counts has committed up to its max offset. A group counts when it is
// clustering with live members, or when it committed on the queue within OffsetRetention
// (unless it is known to be broadcasting). An unknown committed offset of a group that counts
// is not drained.
func (t *Topic) drainCheck(now time.Time, target int) (blockers []Blocker, blocked int) {
	var live []string // the groups that count for every queue, sorted
	for name, g := range t.groups {
		if g.model == Clustering && len(g.members) > 0 {
			live = append(live, name)
		}
	}
	slices.Sort(live)
	var counting []string // scratch, reused for every queue
	for _, b := range t.brokers {
		for q := target; q < b.Read; q++ {
			counting = t.countingGroups(now, t.queues[queueKey{b.Name, q}], live, counting[:0])
			if t.queueBlockers(now, b.Name, q, counting, &blockers) {
				blocked++
			}
		}
	}
	return blockers, blocked
}

// queueBlockers appends the reasons queue q of broker is not drained (while fewer than
// maxBlockers are kept, so a topic with a thousand blocked queues does not format a thousand
// messages) and reports whether there is any.
func (t *Topic) queueBlockers(now time.Time, broker string, queue int, counting []string, out *[]Blocker) bool {
	n := len(*out)
	found := false
	add := func(group string, behind int64, format string, args ...any) {
		found = true
		if len(*out) < maxBlockers {
			*out = append(*out, Blocker{Broker: broker, Queue: queue, Group: group, Behind: behind, Reason: fmt.Sprintf(format, args...)})
		}
	}
	q := t.queues[queueKey{broker, queue}]
	if q == nil || q.max < 0 {
		add("", 0, "max offset unknown")
		return true
	}
	if q.max > 0 {
		// Without a reported store time, the time the current max was first seen bounds the
		// last write from above: no report showed a later write.
		last, what := q.lastWrite, "last write"
		if last.IsZero() {
			last, what = q.maxSince, "max offset first seen"
		}
		if quiet := now.Sub(last); quiet < t.policy.DrainQuietFor {
			add("", 0, "%s %s ago, under drainQuietFor %s", what, formatDuration(quiet), formatDuration(t.policy.DrainQuietFor))
		}
	}
	for _, name := range counting {
		c, ok := q.commits[name]
		switch {
		case !ok:
			add(name, -1, "committed offset unknown")
		case c.offset < q.max:
			add(name, q.max-c.offset, "%d messages behind (committed %d, max %d)", q.max-c.offset, c.offset, q.max)
		}
	}
	slices.SortFunc((*out)[n:], compareBlockers)
	return found
}

// countingGroups appends to dst, sorted, the groups whose consumption of q decides whether it
// is drained: the live clustering groups, then those that committed on q within retention.
// It forgets the commits of groups that are not live and are past retention.
func (t *Topic) countingGroups(now time.Time, q *queueOffsets, live, dst []string) []string {
	dst = append(dst, live...)
	if q == nil {
		return dst
	}
	extra := false
	for name, c := range q.commits {
		g := t.groups[name]
		if g != nil && g.model == Clustering && len(g.members) > 0 {
			continue // already counted
		}
		if g != nil && g.model == Broadcasting {
			continue
		}
		if now.Sub(c.since) > t.policy.OffsetRetention {
			// It no longer blocks; forget it, or groups that come and go would pile up. If
			// the group comes back, its members report its offsets again.
			delete(q.commits, name)
			t.dirty = true
			continue
		}
		dst = append(dst, name)
		extra = true
	}
	if extra {
		slices.Sort(dst)
	}
	return dst
}

// forgetQueuesFrom forgets what is known of broker's queues numbered from on: they no longer
// exist, and if they come back their offsets will be reported afresh.
func (t *Topic) forgetQueuesFrom(broker string, from int) {
	for k := range t.queues {
		if k.broker == broker && k.queue >= from {
			delete(t.queues, k)
		}
	}
}

// listBlockers formats blockers for a message.
func listBlockers(bs []Blocker) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}
