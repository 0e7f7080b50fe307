package autoscale

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Topic is the auto-scaling state machine of one topic. Every input method takes the current
// time, applies the input, then takes every step that is due, and returns what it did. A Topic
// is not safe for concurrent use: the daemon serialises the inputs of a topic (one mutex per
// topic is enough; topics are independent).
type Topic struct {
	name    string
	policy  Policy
	brokers []Broker // sorted by name
	// layout versions the readable queue set (the brokers and their read counts). Members
	// confirm the layout their assignment was computed over; see Confirm.
	layout uint64
	// gen is the last plan generation issued.
	gen    uint64
	groups map[string]*group
	queues map[queueKey]*queueOffsets

	plan plan
	// writeLow is non-nil while the target is below some broker's write count: since when, and
	// the highest target seen since (the count a write drop goes to).
	writeLow *window
	// readLowSince is when the target fell below some broker's read count; zero when it is not.
	readLowSince time.Time
	// writeDroppedAt is when a write count last dropped: queues at or above the new count have
	// had no new producers since (once the producers' routes refresh).
	writeDroppedAt time.Time

	// target is the last target computed, so that EventTarget fires on changes only.
	target int

	out   Output // collects what the current input produces
	dirty bool   // the current input changed state that State must carry across a restart
}

type group struct {
	model Model
	// members maps each live member to the highest layout it confirmed (0: none yet).
	members map[string]uint64
}

type plan struct {
	phase Phase
	gen   uint64
	since time.Time // when the plan was made
	// layout is, for RaiseWrite, the layout every member must confirm before the write rises.
	layout uint64
	// Drain checks of LowerRead so far, the last one's time and what blocked it.
	checks        int
	lastCheck     time.Time
	blockers      []Blocker
	blockedQueues int
}

type window struct {
	since time.Time
	peak  int
}

// New returns the state machine of topic name, with the given brokers and their current
// counts. It validates the policy and the brokers. The first layout is 1.
func New(name string, p Policy, brokers []Broker) (*Topic, error) {
	if name == "" {
		return nil, fmt.Errorf("autoscale: topic with no name")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &Topic{
		name:   name,
		policy: p,
		layout: 1,
		groups: make(map[string]*group),
		queues: make(map[queueKey]*queueOffsets),
	}
	for _, b := range brokers {
		if err := b.validate(); err != nil {
			return nil, err
		}
		if _, ok := t.broker(b.Name); ok {
			return nil, fmt.Errorf("autoscale: broker %s listed twice", b.Name)
		}
		t.insertBroker(b)
	}
	t.target, _, _ = t.computeTarget()
	return t, nil
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Policy returns the topic's policy.
func (t *Topic) Policy() Policy { return t.policy }

// Layout returns the version of the topic's readable queue set. It starts at 1 and increases
// whenever a read count changes or a broker is added or removed. The daemon records, with
// every assignment generation it computes for a group, the layout it computed it over, and
// passes that layout to Confirm when a member reports it applied the generation.
func (t *Topic) Layout() uint64 { return t.layout }

// Brokers returns the brokers and their current counts, sorted by name.
func (t *Topic) Brokers() []Broker { return slices.Clone(t.brokers) }

// Tick takes the steps that are due at now. The daemon calls it at NextDeadline.
func (t *Topic) Tick(now time.Time) Output {
	t.begin()
	t.reconcile(now)
	return t.end()
}

// SetGroup records a snapshot of a consumer group subscribed to the topic: its model and its
// live members, replacing the previous snapshot. Members that stay keep their confirmations.
// An empty member list keeps the group known with no live members (its committed offsets
// still count within OffsetRetention); RemoveGroup forgets it.
func (t *Topic) SetGroup(now time.Time, g Group) (Output, error) {
	if g.Name == "" {
		return Output{}, fmt.Errorf("autoscale: group with no name")
	}
	if g.Model > Broadcasting {
		return Output{}, fmt.Errorf("autoscale: group %s: unknown message model %d", g.Name, uint8(g.Model))
	}
	old := t.groups[g.Name]
	if old != nil && old.model == g.Model && sameMembers(old.members, g.Members) {
		// The usual heartbeat: nothing changed, so keep the map (and its confirmations)
		// rather than rebuild it.
		t.begin()
		t.reconcile(now)
		return t.end(), nil
	}
	members := make(map[string]uint64, len(g.Members))
	for _, id := range g.Members {
		if id == "" {
			return Output{}, fmt.Errorf("autoscale: group %s: member with no id", g.Name)
		}
		if _, dup := members[id]; dup {
			return Output{}, fmt.Errorf("autoscale: group %s: member %s listed twice", g.Name, id)
		}
		if old != nil {
			members[id] = old.members[id]
		} else {
			members[id] = 0
		}
	}
	t.begin()
	if old == nil || old.model != g.Model {
		t.dirty = true
	}
	t.groups[g.Name] = &group{model: g.Model, members: members}
	t.reconcile(now)
	return t.end(), nil
}

// sameMembers reports whether ids lists exactly the members of m, each once.
func sameMembers(m map[string]uint64, ids []string) bool {
	if len(m) != len(ids) {
		return false
	}
	for _, id := range ids {
		if _, ok := m[id]; !ok {
			return false
		}
	}
	// As many ids as entries, each found: the same set unless an id repeats and so hides a
	// missing one. A repeat is an error, which the slow path reports.
	return !hasDuplicate(ids)
}

// hasDuplicate reports whether ids holds an id twice. Membership lists are small; a quadratic
// scan up to a few dozen ids beats a map allocation.
func hasDuplicate(ids []string) bool {
	if len(ids) > 64 {
		seen := make(map[string]struct{}, len(ids))
		for _, id := range ids {
			if _, dup := seen[id]; dup {
				return true
			}
			seen[id] = struct{}{}
		}
		return false
	}
	for i := 1; i < len(ids); i++ {
		for j := 0; j < i; j++ {
			if ids[i] == ids[j] {
				return true
			}
		}
	}
	return false
}

// RemoveGroup forgets a group that no longer subscribes to the topic. The offsets it committed
// still block a read drop within OffsetRetention.
func (t *Topic) RemoveGroup(now time.Time, name string) Output {
	t.begin()
	if _, ok := t.groups[name]; ok {
		delete(t.groups, name)
		t.dirty = true
	}
	t.reconcile(now)
	return t.end()
}

// Confirm records that member of group has applied an assignment computed over layout (see
// Layout). Confirmations only rise: a late heartbeat reporting an older layout changes
// nothing. A member the last SetGroup of its group did not list is ignored, so the daemon
// sends the membership first. A layout newer than the topic's is an error.
func (t *Topic) Confirm(now time.Time, group, member string, layout uint64) (Output, error) {
	if layout > t.layout {
		return Output{}, fmt.Errorf("autoscale: member %s of group %s confirmed layout %d, newer than the topic's layout %d",
			member, group, layout, t.layout)
	}
	t.begin()
	if g := t.groups[group]; g != nil {
		if cur, ok := g.members[member]; ok && layout > cur {
			g.members[member] = layout
		}
	}
	t.reconcile(now)
	return t.end(), nil
}

// SetBroker adds a broker or overrides its counts, as an operator's topic update does. The
// change supersedes any pending step (DeFiBus let admin updates race its scaler, fault A.11.7;
// here they are one more input). A lowered write count starts the shrinkReadDelay clock of the
// queues above it, as a write step does.
func (t *Topic) SetBroker(now time.Time, b Broker) (Output, error) {
	if err := b.validate(); err != nil {
		return Output{}, err
	}
	t.begin()
	i, found := t.broker(b.Name)
	switch {
	case !found:
		t.insertBroker(b)
		t.layout++
		if b.Write < b.Read {
			t.writeDroppedAt = now
		}
	case t.brokers[i] == b:
		t.reconcile(now)
		return t.end(), nil
	default:
		old := t.brokers[i]
		t.brokers[i] = b
		if b.Read != old.Read {
			t.layout++
			t.forgetQueuesFrom(b.Name, b.Read)
		}
		if b.Write < old.Write {
			t.writeDroppedAt = now
		}
	}
	t.dirty = true
	t.endPlan(now, Idle, fmt.Sprintf("operator set broker %s to read %d, write %d", b.Name, b.Read, b.Write))
	t.reconcile(now)
	return t.end(), nil
}

// RemoveBroker forgets a broker and what was reported about its queues.
func (t *Topic) RemoveBroker(now time.Time, name string) Output {
	t.begin()
	if i, ok := t.broker(name); ok {
		t.brokers = slices.Delete(t.brokers, i, i+1)
		t.forgetQueuesFrom(name, 0)
		t.layout++
		t.dirty = true
		t.endPlan(now, Idle, "broker "+name+" removed")
	}
	t.reconcile(now)
	return t.end()
}

// SetPolicy replaces the policy. Pending steps keep their start times; their due times follow
// the new delays. Disabling drops the pending step.
func (t *Topic) SetPolicy(now time.Time, p Policy) (Output, error) {
	if err := p.Validate(); err != nil {
		return Output{}, err
	}
	t.begin()
	if p != t.policy {
		t.policy = p
		t.dirty = true
	}
	t.reconcile(now)
	return t.end(), nil
}

func (t *Topic) begin() { t.out, t.dirty = Output{}, false }

func (t *Topic) end() Output {
	out := t.out
	out.Persist = t.dirty
	t.out = Output{}
	return out
}

func (t *Topic) broker(name string) (int, bool) {
	return slices.BinarySearchFunc(t.brokers, name, func(b Broker, name string) int { return strings.Compare(b.Name, name) })
}

func (t *Topic) insertBroker(b Broker) {
	i, _ := t.broker(b.Name)
	t.brokers = slices.Insert(t.brokers, i, b)
}

// computeTarget applies the largest-group rule: the live members of the largest clustering
// group, clamped to [Min, Max]. Ties go to the first name, so the answer does not depend on
// map order.
func (t *Topic) computeTarget() (target int, largest string, size int) {
	for name, g := range t.groups {
		if g.model != Clustering {
			continue
		}
		if n := len(g.members); n > size || (n == size && n > 0 && name < largest) {
			largest, size = name, n
		}
	}
	return min(max(size, t.policy.Min), t.policy.Max), largest, size
}

// sizing is a target and the facts behind it.
type sizing struct {
	target  int
	largest string // the largest clustering group; "" when none has live members
	size    int    // its live members
	min     int
}

func (t *Topic) sizing() sizing {
	target, largest, size := t.computeTarget()
	return sizing{target: target, largest: largest, size: size, min: t.policy.Min}
}

// why explains the target in words, for events, step reasons and Status. It is formatted only
// when something is said: most inputs change nothing.
func (z sizing) why() string {
	if z.size == 0 {
		return fmt.Sprintf("no clustering group has live members, min %d applies", z.min)
	}
	s := fmt.Sprintf("largest clustering group %s has %s", z.largest, plural(z.size, "live member"))
	switch {
	case z.size < z.target:
		s += fmt.Sprintf(", raised to min %d", z.target)
	case z.size > z.target:
		s += fmt.Sprintf(", capped at max %d", z.target)
	}
	return s
}

// reconcile moves the counts toward the target as far as the rules allow at now. Every input
// ends here, so a step that became due while no timer fired still runs with the next input,
// and every step recomputes the target when it runs (as DeFiBus does).
func (t *Topic) reconcile(now time.Time) {
	z := t.sizing()
	target := z.target
	if target != t.target {
		t.event(now, EventTarget, "%d -> %d: %s", t.target, target, z.why())
		t.target = target
	}
	if !t.policy.Enabled {
		t.endPlan(now, Idle, "autoscaling disabled")
		t.setWindows(nil, time.Time{})
		return
	}

	// Read rises at once: a queue must be readable before any producer may write to it.
	var raise []int
	for i, b := range t.brokers {
		if b.Read < target {
			raise = append(raise, i)
		}
	}
	if len(raise) > 0 {
		t.layout++
		t.newPlan(now, RaiseWrite, fmt.Sprintf("target rose to %d", target))
		for _, i := range raise {
			t.take(now, SetRead, i, target, "expansion: "+z.why())
		}
		t.announce(now, target)
	}

	for {
		t.trackWindows(now, target)
		if want := t.wanted(target); want != t.plan.phase {
			t.newPlan(now, want, t.changeReason(want, target))
			t.announce(now, target)
		}
		if !t.runDue(now, z) {
			return
		}
	}
}

// wanted is the phase the counts call for: raise the write count first (readers are already
// there), then lower the write count, then the read count. One step is pending at a time; a
// later phase waits behind an earlier one.
func (t *Topic) wanted(target int) Phase {
	var writeBelow, writeAbove, readAbove bool
	for _, b := range t.brokers {
		writeBelow = writeBelow || b.Write < target
		writeAbove = writeAbove || b.Write > target
		readAbove = readAbove || b.Read > target
	}
	switch {
	case writeBelow:
		return RaiseWrite
	case writeAbove:
		return LowerWrite
	case readAbove:
		return LowerRead
	}
	return Idle
}

func (t *Topic) changeReason(want Phase, target int) string {
	switch want {
	case RaiseWrite:
		return fmt.Sprintf("target rose to %d", target)
	case LowerWrite, LowerRead:
		return fmt.Sprintf("target fell to %d", target)
	}
	return fmt.Sprintf("target back to %d", target)
}

// trackWindows maintains the clocks a shrink waits on. A window opens when the target falls
// below a count and closes when it is no longer below; while it is open, the write window
// remembers the highest target seen, so a shrink never goes below a value the target had
// within shrinkStableFor.
func (t *Topic) trackWindows(now time.Time, target int) {
	maxWrite, maxRead := 0, 0
	for _, b := range t.brokers {
		maxWrite, maxRead = max(maxWrite, b.Write), max(maxRead, b.Read)
	}
	writeLow := t.writeLow
	switch {
	case maxWrite <= target:
		writeLow = nil
	case writeLow == nil:
		writeLow = &window{since: now, peak: target}
	case target > writeLow.peak:
		writeLow = &window{since: writeLow.since, peak: target}
	}
	readLowSince := t.readLowSince
	switch {
	case maxRead <= target:
		readLowSince = time.Time{}
	case readLowSince.IsZero():
		readLowSince = now
	}
	t.setWindows(writeLow, readLowSince)
}

func (t *Topic) setWindows(writeLow *window, readLowSince time.Time) {
	if (writeLow == nil) != (t.writeLow == nil) || (writeLow != nil && *writeLow != *t.writeLow) ||
		!readLowSince.Equal(t.readLowSince) {
		t.dirty = true
	}
	t.writeLow, t.readLowSince = writeLow, readLowSince
}

// newPlan replaces the pending step by a new one of phase want (Idle: none), under a new
// generation. A pending step replaced before it ran is reported superseded or cancelled.
func (t *Topic) newPlan(now time.Time, want Phase, reason string) {
	t.endPlan(now, want, reason)
	if want == Idle {
		return
	}
	t.gen++
	t.plan = plan{phase: want, gen: t.gen, since: now, layout: t.layout}
	t.dirty = true
}

// endPlan drops the pending step, if any, saying why. next is what replaces it.
func (t *Topic) endPlan(now time.Time, next Phase, reason string) {
	if t.plan.phase == Idle {
		return
	}
	if next == Idle {
		t.eventGen(now, EventCancelled, t.plan.gen, "gen %d (%s) cancelled: %s", t.plan.gen, t.plan.phase, reason)
	} else {
		t.eventGen(now, EventSuperseded, t.plan.gen, "gen %d (%s) superseded by gen %d (%s): %s",
			t.plan.gen, t.plan.phase, t.gen+1, next, reason)
	}
	t.plan = plan{}
	t.dirty = true
}

// announce reports the pending step just planned.
func (t *Topic) announce(now time.Time, target int) {
	p := t.policy
	switch t.plan.phase {
	case RaiseWrite:
		t.event(now, EventPlanned, "gen %d: raise write to %d at %s (expandWriteDelay %s), once every member of the clustering groups confirms layout %d, at the latest %s (maxConfirmWait %s)",
			t.plan.gen, target, stamp(t.plan.since.Add(p.ExpandWriteDelay)), formatDuration(p.ExpandWriteDelay),
			t.plan.layout, stamp(t.plan.since.Add(p.MaxConfirmWait)), formatDuration(p.MaxConfirmWait))
	case LowerWrite:
		t.event(now, EventPlanned, "gen %d: lower write to %d at %s, if the target stays below the write count until then (shrinkStableFor %s)",
			t.plan.gen, t.writeLow.peak, stamp(t.writeLow.since.Add(p.ShrinkStableFor)), formatDuration(p.ShrinkStableFor))
	case LowerRead:
		t.event(now, EventPlanned, "gen %d: lower read to %d at %s (%s), once every queue to remove is drained",
			t.plan.gen, target, stamp(t.lowerReadDue()), t.lowerReadClock())
	}
}

// runDue takes the pending step if it is due, and reports whether it did.
func (t *Topic) runDue(now time.Time, z sizing) bool {
	p, target := t.policy, z.target
	switch t.plan.phase {
	case RaiseWrite:
		if now.Before(t.plan.since.Add(p.ExpandWriteDelay)) {
			return false
		}
		confirmed := t.allConfirmed(t.plan.layout)
		if !confirmed && now.Before(t.plan.since.Add(p.MaxConfirmWait)) {
			return false
		}
		reason := fmt.Sprintf("expansion: planned %s ago, every member confirmed layout %d",
			formatDuration(now.Sub(t.plan.since)), t.plan.layout)
		if !confirmed {
			missing := t.unconfirmed(t.plan.layout)
			t.event(now, EventUnconfirmed, "gen %d: raising write to %d without confirmation of layout %d from %s after maxConfirmWait %s: %s",
				t.plan.gen, target, t.plan.layout, plural(len(missing), "member"), formatDuration(p.MaxConfirmWait), listSome(missing, 10))
			reason = fmt.Sprintf("expansion: planned %s ago, %s unconfirmed after maxConfirmWait",
				formatDuration(now.Sub(t.plan.since)), plural(len(missing), "member"))
		}
		for i, b := range t.brokers {
			if b.Write < target {
				t.take(now, SetWrite, i, target, reason)
			}
		}
	case LowerWrite:
		if now.Before(t.writeLow.since.Add(p.ShrinkStableFor)) {
			return false
		}
		to := t.writeLow.peak
		reason := fmt.Sprintf("shrink: the target has stayed at or below %d for %s; %s",
			to, formatDuration(now.Sub(t.writeLow.since)), z.why())
		for i, b := range t.brokers {
			if b.Write > to {
				t.take(now, SetWrite, i, to, reason)
			}
		}
		t.writeDroppedAt = now
		t.writeLow = nil
	case LowerRead:
		if now.Before(t.lowerReadDue()) {
			return false
		}
		blockers, blocked := t.drainCheck(now, target)
		if blocked > 0 {
			t.plan.checks++
			t.plan.lastCheck = now
			t.plan.blockers, t.plan.blockedQueues = blockers, blocked
			t.event(now, EventNotDrained, "gen %d: read stays above %d, check %d: %s not drained: %s; next check %s",
				t.plan.gen, target, t.plan.checks, plural(blocked, "queue"), listBlockers(blockers), stamp(t.lowerReadDue()))
			return false
		}
		for i, b := range t.brokers {
			if b.Read > target {
				t.take(now, SetRead, i, target, fmt.Sprintf("shrink: %s drained", queueRange(target, b.Read)))
				t.forgetQueuesFrom(b.Name, target)
			}
		}
		t.layout++
		t.readLowSince = time.Time{}
	default:
		return false
	}
	t.plan = plan{}
	t.dirty = true
	return true
}

// lowerReadDue is when a LowerRead step is next checked: shrinkReadDelay after the write drop
// but not before the target has stayed below the read count for shrinkStableFor; after a
// failed check, shrinkReadDelay after it, forever.
func (t *Topic) lowerReadDue() time.Time {
	p := t.policy
	if t.plan.checks > 0 {
		return t.plan.lastCheck.Add(p.ShrinkReadDelay)
	}
	due := t.readLowSince.Add(p.ShrinkStableFor)
	if d := t.writeDroppedAt.Add(p.ShrinkReadDelay); d.After(due) {
		due = d
	}
	return due
}

// lowerReadClock names the clock a LowerRead step's first check waits on.
func (t *Topic) lowerReadClock() string {
	p := t.policy
	if t.writeDroppedAt.Add(p.ShrinkReadDelay).Before(t.readLowSince.Add(p.ShrinkStableFor)) {
		return fmt.Sprintf("once the target has stayed below the read count for shrinkStableFor %s", formatDuration(p.ShrinkStableFor))
	}
	return fmt.Sprintf("shrinkReadDelay %s after the write drop", formatDuration(p.ShrinkReadDelay))
}

// take applies one step to broker i and reports it.
func (t *Topic) take(now time.Time, kind StepKind, i int, to int, reason string) {
	b := &t.brokers[i]
	s := Step{Kind: kind, Broker: b.Name, To: to, Generation: t.plan.gen, Reason: reason}
	if kind == SetRead {
		s.From, b.Read = b.Read, to
	} else {
		s.From, b.Write = b.Write, to
	}
	if b.Write > b.Read {
		// Every caller derives `to` from counts that keep this order; reaching here is a bug
		// that would let producers write to queues no consumer reads.
		panic(fmt.Sprintf("autoscale: step %v leaves broker %s with write %d above read %d", s, b.Name, b.Write, b.Read))
	}
	t.out.Steps = append(t.out.Steps, s)
	t.eventGen(now, EventStep, s.Generation, "%s", s.String())
}

// allConfirmed reports whether every live member of every clustering group has confirmed
// layout. Broadcasting groups do not size the topic and are not waited for.
func (t *Topic) allConfirmed(layout uint64) bool {
	for _, g := range t.groups {
		if g.model != Clustering {
			continue
		}
		for _, l := range g.members {
			if l < layout {
				return false
			}
		}
	}
	return true
}

// unconfirmed lists, sorted, the "group/member" that have not confirmed layout.
func (t *Topic) unconfirmed(layout uint64) []string {
	var out []string
	for name, g := range t.groups {
		if g.model != Clustering {
			continue
		}
		for id, l := range g.members {
			if l < layout {
				out = append(out, name+"/"+id)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (t *Topic) event(now time.Time, kind EventKind, format string, args ...any) {
	t.eventGen(now, kind, t.gen, format, args...)
}

func (t *Topic) eventGen(now time.Time, kind EventKind, gen uint64, format string, args ...any) {
	t.out.Events = append(t.out.Events, Event{Time: now, Kind: kind, Generation: gen, Message: fmt.Sprintf(format, args...)})
	t.dirty = true
}

// stamp formats a time for messages.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// plural formats a count and a noun, "1 member", "3 members".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// queueRange formats the queue ids [from, to): "queue 4", "queues 3..4".
func queueRange(from, to int) string {
	if to-from == 1 {
		return fmt.Sprintf("queue %d", from)
	}
	return fmt.Sprintf("queues %d..%d", from, to-1)
}

// listSome joins up to n items and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

func compareBlockers(a, b Blocker) int {
	return cmp.Or(strings.Compare(a.Broker, b.Broker), cmp.Compare(a.Queue, b.Queue), strings.Compare(a.Group, b.Group))
}
