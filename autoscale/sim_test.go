package autoscale_test

import (
	"container/heap"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
)

// The simulated day (issue 5, item 4): topics whose consumer groups churn at random (members
// join, leave, restart in rolling waves, scale out in bursts), whose members confirm new
// layouts after a delay (a few of them too late), and whose queues receive messages while
// writable and are consumed with some lag, reported every minute. Each topic is one Topic
// driven exactly as the daemon drives it: every input at its time, a tick at NextDeadline.
// Only the time spent inside the Topic's methods is measured.
//
//	go test ./autoscale -run '^$' -bench SimulatedDay -benchtime 1x
//
// TestSimulatedDay runs a smaller version (100 topics, 3 hours) on every test run and checks
// the rules hold throughout.

// simConfig sizes a simulation.
type simConfig struct {
	topics   int
	duration time.Duration
	seed     uint64
}

// simResult is what a simulation measured.
type simResult struct {
	inputs     int           // calls into Topics
	inCalls    time.Duration // time spent inside them
	callTimes  []time.Duration
	byKind     map[string][]time.Duration // call times by input: tick, membership, ...
	steps      map[string]int             // "set-read up", ...
	events     map[autoscale.EventKind]int
	cancelled  map[string]int // cancelled plans by phase
	membership int            // membership changes fed (SetGroup calls that changed a group)
	// Per topic, how long the per-broker read count, and the write count, stayed below the
	// live members of the largest clustering group (clamped to the policy's bounds): time a
	// consumer had no queue to read, and no queue that producers write to.
	readShort, writeShort []time.Duration
	// Per topic, how long some broker had more read queues than the target (a shrink in
	// progress or blocked by undrained queues).
	readExcess []time.Duration
}

type simEvent struct {
	at    time.Time
	seq   uint64 // ties broken by insertion order, so a seed gives one history
	topic int
	kind  simKind
	group int
	// member for confirm and rejoin; layout for confirm; gen for tick (stale ticks ignored)
	member string
	layout uint64
	gen    uint64
}

type simKind uint8

const (
	simTick simKind = iota
	simChurn
	simRejoin // a member of a rolling restart goes down
	simBack   // and comes back
	simConfirm
	simReport
)

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int)    { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)      { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any        { old := *q; e := old[len(old)-1]; *q = old[:len(old)-1]; return e }
func (q *simQueue) add(e *simEvent) { heap.Push(q, e) }

type simGroup struct {
	name    string
	model   autoscale.Model
	members []string
	next    int
	// catchUp is how long after a queue's last write the group has consumed it to the end.
	catchUp time.Duration
}

type simQueueState struct {
	max       int64
	lastWrite time.Time
	rate      float64 // messages per second while writable
	frac      float64
}

type simTopic struct {
	t       *autoscale.Topic
	policy  autoscale.Policy
	groups  []*simGroup
	queues  map[string][]simQueueState // by broker, by queue id
	armed   time.Time
	tickGen uint64
	// accounting
	since                             time.Time
	readShort, writeShort, readExcess bool
}

var simBrokers = []string{"broker-a", "broker-b"}

func runSim(cfg simConfig, measureEach bool) simResult {
	rng := rand.New(rand.NewPCG(cfg.seed, 7))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(cfg.duration)
	res := simResult{steps: map[string]int{}, events: map[autoscale.EventKind]int{}, byKind: map[string][]time.Duration{}, cancelled: map[string]int{},
		readShort: make([]time.Duration, cfg.topics), writeShort: make([]time.Duration, cfg.topics), readExcess: make([]time.Duration, cfg.topics)}
	var q simQueue
	var seq uint64
	push := func(e *simEvent) { seq++; e.seq = seq; q.add(e) }
	topics := make([]*simTopic, cfg.topics)

	// call runs one input, timing it, and handles its output.
	var handle func(now time.Time, i int, out autoscale.Output)
	call := func(now time.Time, i int, kind string, f func() autoscale.Output) {
		tp := topics[i]
		account(&res, i, tp, now)
		t0 := time.Now()
		out := f()
		d := time.Since(t0)
		res.inputs++
		res.inCalls += d
		if measureEach {
			res.callTimes = append(res.callTimes, d)
			res.byKind[kind] = append(res.byKind[kind], d)
		}
		handle(now, i, out)
	}
	handle = func(now time.Time, i int, out autoscale.Output) {
		tp := topics[i]
		layoutChanged := false
		for _, s := range out.Steps {
			dir := "up"
			if s.To < s.From {
				dir = "down"
			}
			res.steps[s.Kind.String()+" "+dir]++
			if s.Kind == autoscale.SetRead {
				layoutChanged = true
			}
			// Queues stop or start receiving messages from here on.
			if s.Kind == autoscale.SetWrite {
				qs := tp.queues[s.Broker]
				for k := min(s.From, s.To); k < max(s.From, s.To); k++ {
					if s.To < s.From {
						advanceQueue(&qs[k], now) // written until now
					} else {
						qs[k].lastWrite = now // written from now on
					}
				}
			}
		}
		for _, ev := range out.Events {
			res.events[ev.Kind]++
			if ev.Kind == autoscale.EventCancelled {
				// "gen N (phase) cancelled: why"
				_, rest, _ := strings.Cut(ev.Message, "(")
				phase, _, _ := strings.Cut(rest, ")")
				res.cancelled[phase]++
			}
		}
		if layoutChanged {
			// Every member gets a generation over the new layout and applies it 1-5 s later;
			// one in fifty is slow (30 s to 2 min), past maxConfirmWait now and then.
			layout := tp.t.Layout()
			for gi, g := range tp.groups {
				for _, m := range g.members {
					push(&simEvent{at: now.Add(confirmDelay(rng)), topic: i, kind: simConfirm, group: gi, member: m, layout: layout})
				}
			}
		}
		recompute(tp)
		if due, ok := tp.t.NextDeadline(); ok && (tp.armed.IsZero() || !due.Equal(tp.armed)) {
			tp.tickGen++
			tp.armed = due
			push(&simEvent{at: due, topic: i, kind: simTick, gen: tp.tickGen})
		} else if !ok {
			tp.armed = time.Time{}
		}
	}

	policy := autoscale.DefaultPolicy()
	policy.Enabled, policy.Max = true, 64
	for i := range topics {
		tp := &simTopic{policy: policy, queues: map[string][]simQueueState{}, since: start}
		nGroups := 1 + rng.IntN(3)
		for g := range nGroups {
			sg := &simGroup{name: fmt.Sprintf("g%d", g), catchUp: 30 * time.Second}
			if rng.IntN(20) == 0 { // a slow consumer group: up to 20 min behind
				sg.catchUp = time.Duration(rng.Int64N(int64(20 * time.Minute)))
			}
			for range 1 + rng.IntN(12) {
				sg.members = append(sg.members, fmt.Sprintf("m%d", sg.next))
				sg.next++
			}
			tp.groups = append(tp.groups, sg)
		}
		if rng.IntN(10) < 3 {
			sg := &simGroup{name: "bcast", model: autoscale.Broadcasting}
			for range 1 + rng.IntN(20) {
				sg.members = append(sg.members, fmt.Sprintf("m%d", sg.next))
				sg.next++
			}
			tp.groups = append(tp.groups, sg)
		}
		target := 0
		for _, g := range tp.groups {
			if g.model == autoscale.Clustering {
				target = max(target, len(g.members))
			}
		}
		var brokers []autoscale.Broker
		for _, b := range simBrokers {
			brokers = append(brokers, autoscale.Broker{Name: b, Read: target, Write: target})
			qs := make([]simQueueState, policy.Max)
			for k := range qs {
				qs[k] = simQueueState{rate: 1 + rng.Float64()*50, lastWrite: start}
			}
			tp.queues[b] = qs
		}
		t, err := autoscale.New(fmt.Sprintf("topic-%d", i), policy, brokers)
		if err != nil {
			panic(err)
		}
		tp.t = t
		topics[i] = tp
		for _, g := range tp.groups {
			if _, err := t.SetGroup(start, autoscale.Group{Name: g.name, Model: g.model, Members: g.members}); err != nil {
				panic(err)
			}
			for _, m := range g.members {
				t.Confirm(start, g.name, m, t.Layout())
			}
		}
		recompute(tp)
		for gi, g := range tp.groups {
			if g.model == autoscale.Clustering {
				push(&simEvent{at: start.Add(churnDelay(rng)), topic: i, kind: simChurn, group: gi})
			}
		}
		push(&simEvent{at: start.Add(time.Duration(rng.Int64N(int64(time.Minute)))), topic: i, kind: simReport})
	}

	for q.Len() > 0 {
		e := heap.Pop(&q).(*simEvent)
		if e.at.After(end) {
			break
		}
		now, i := e.at, e.topic
		tp := topics[i]
		switch e.kind {
		case simTick:
			if e.gen != tp.tickGen {
				continue // re-armed since
			}
			tp.armed = time.Time{}
			call(now, i, "tick", func() autoscale.Output { return tp.t.Tick(now) })
		case simChurn:
			g := tp.groups[e.group]
			setGroup := func() {
				res.membership++
				call(now, i, "membership", func() autoscale.Output {
					out, err := tp.t.SetGroup(now, autoscale.Group{Name: g.name, Model: g.model, Members: slices.Clone(g.members)})
					if err != nil {
						panic(err)
					}
					return out
				})
			}
			switch r := rng.IntN(100); {
			case r < 40 && len(g.members) < 48: // one joins
				g.members = append(g.members, fmt.Sprintf("m%d", g.next))
				g.next++
				setGroup()
				push(&simEvent{at: now.Add(confirmDelay(rng)), topic: i, kind: simConfirm, group: e.group, member: g.members[len(g.members)-1], layout: tp.t.Layout()})
			case r < 80 && len(g.members) > 1: // one leaves
				k := rng.IntN(len(g.members))
				g.members = slices.Delete(g.members, k, k+1)
				setGroup()
			case r < 92: // a rolling restart: each member leaves and is back 20 s later, one after the other
				for k, m := range g.members {
					push(&simEvent{at: now.Add(time.Duration(k) * 25 * time.Second), topic: i, kind: simRejoin, group: e.group, member: m})
				}
			default: // a burst: scaled out by 4 to 16 members, or back in by half
				if rng.IntN(2) == 0 && len(g.members) < 32 {
					for range 4 + rng.IntN(13) {
						g.members = append(g.members, fmt.Sprintf("m%d", g.next))
						g.next++
					}
				} else if len(g.members) > 2 {
					g.members = g.members[:len(g.members)/2]
				}
				setGroup()
			}
			push(&simEvent{at: now.Add(churnDelay(rng)), topic: i, kind: simChurn, group: e.group})
		case simRejoin:
			g := tp.groups[e.group]
			k := slices.Index(g.members, e.member)
			if k < 0 {
				continue
			}
			g.members = slices.Delete(g.members, k, k+1)
			res.membership++
			call(now, i, "membership", func() autoscale.Output {
				out, _ := tp.t.SetGroup(now, autoscale.Group{Name: g.name, Model: g.model, Members: slices.Clone(g.members)})
				return out
			})
			// Back 20 s later under a new id, as a restarted consumer without an instance id.
			m := fmt.Sprintf("m%d", g.next)
			g.next++
			push(&simEvent{at: now.Add(20 * time.Second), topic: i, kind: simBack, group: e.group, member: m})
		case simBack:
			g := tp.groups[e.group]
			g.members = append(g.members, e.member)
			res.membership++
			call(now, i, "membership", func() autoscale.Output {
				out, _ := tp.t.SetGroup(now, autoscale.Group{Name: g.name, Model: g.model, Members: slices.Clone(g.members)})
				return out
			})
			push(&simEvent{at: now.Add(confirmDelay(rng)), topic: i, kind: simConfirm, group: e.group, member: e.member, layout: tp.t.Layout()})
		case simConfirm:
			g := tp.groups[e.group]
			call(now, i, "confirm", func() autoscale.Output {
				out, err := tp.t.Confirm(now, g.name, e.member, e.layout)
				if err != nil {
					panic(err)
				}
				return out
			})
		case simReport:
			// Every minute: the brokers' max offsets, and each clustering group's committed
			// offsets: on a queue being written, caught up with probability 0.9, else behind
			// by up to 500 messages; on a queue no longer written, caught up once the group's
			// catch-up time has passed since the last write.
			advanceQueues(tp, now)
			var broker []autoscale.Offset
			for _, b := range tp.t.Brokers() {
				for k := range b.Read {
					qs := tp.queues[b.Name][k]
					broker = append(broker, autoscale.Offset{Broker: b.Name, Queue: k, Committed: -1, Max: qs.max, LastWrite: qs.lastWrite})
				}
			}
			call(now, i, "offsets (broker)", func() autoscale.Output {
				out, _ := tp.t.ReportOffsets(now, "", broker)
				return out
			})
			for _, g := range tp.groups {
				if g.model != autoscale.Clustering {
					continue
				}
				offs := slices.Clone(broker)
				for k := range offs {
					offs[k].Committed = offs[k].Max
					behind := rng.IntN(10) == 0
					if !offs[k].LastWrite.Equal(now) { // not written since the last report
						behind = now.Sub(offs[k].LastWrite) < g.catchUp
					}
					if behind && offs[k].Max > 0 {
						offs[k].Committed = max(0, offs[k].Max-1-rng.Int64N(500))
					}
				}
				call(now, i, "offsets (group)", func() autoscale.Output {
					out, _ := tp.t.ReportOffsets(now, g.name, offs)
					return out
				})
			}
			push(&simEvent{at: now.Add(time.Minute), topic: i, kind: simReport})
		}
	}
	for i, tp := range topics {
		account(&res, i, tp, end)
	}
	return res
}

func confirmDelay(rng *rand.Rand) time.Duration {
	if rng.IntN(50) == 0 {
		return 30*time.Second + time.Duration(rng.Int64N(int64(90*time.Second)))
	}
	return time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
}

// churnDelay is the time to a group's next membership change: 20 minutes on average.
func churnDelay(rng *rand.Rand) time.Duration {
	return time.Duration(rng.ExpFloat64() * float64(20*time.Minute))
}

// advanceQueues brings the queues' max offsets up to now: a queue receives messages while it
// is writable.
func advanceQueues(tp *simTopic, now time.Time) {
	for _, b := range tp.t.Brokers() {
		qs := tp.queues[b.Name]
		for k := range b.Write {
			advanceQueue(&qs[k], now)
		}
	}
}

func advanceQueue(s *simQueueState, now time.Time) {
	if dt := now.Sub(s.lastWrite).Seconds(); dt > 0 {
		s.frac += dt * s.rate
		n := math.Floor(s.frac)
		s.max += int64(n)
		s.frac -= n
		s.lastWrite = now
	}
}

// recompute notes whether the topic is now short of queues or over them.
func recompute(tp *simTopic) {
	want := 0
	for _, g := range tp.groups {
		if g.model == autoscale.Clustering {
			want = max(want, len(g.members))
		}
	}
	want = min(max(want, tp.policy.Min), tp.policy.Max)
	tp.readShort, tp.writeShort, tp.readExcess = false, false, false
	for _, b := range tp.t.Brokers() {
		tp.readShort = tp.readShort || b.Read < want
		tp.writeShort = tp.writeShort || b.Write < want
		tp.readExcess = tp.readExcess || b.Read > want
		if b.Write > b.Read {
			panic(fmt.Sprintf("%s: broker %s write %d above read %d", tp.t.Name(), b.Name, b.Write, b.Read))
		}
	}
}

// account adds the time since the topic's last input to the states it was in.
func account(res *simResult, i int, tp *simTopic, now time.Time) {
	d := now.Sub(tp.since)
	if tp.readShort {
		res.readShort[i] += d
	}
	if tp.writeShort {
		res.writeShort[i] += d
	}
	if tp.readExcess {
		res.readExcess[i] += d
	}
	tp.since = now
}

// percentiles returns p50, p90, p99 and the max of ds.
func percentiles(ds []time.Duration) [4]time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return [4]time.Duration{at(0.5), at(0.9), at(0.99), s[len(s)-1]}
}

func TestSimulatedDay(t *testing.T) {
	res := runSim(simConfig{topics: 100, duration: 3 * time.Hour, seed: 1}, false)
	if res.steps["set-read up"] == 0 || res.steps["set-write up"] == 0 || res.steps["set-write down"] == 0 || res.steps["set-read down"] == 0 {
		t.Fatalf("a kind of step never happened: %v", res.steps)
	}
	// Read rises at once: no consumer is ever without a queue to read.
	for i, d := range res.readShort {
		if d != 0 {
			t.Fatalf("topic %d had fewer read queues than members for %v", i, d)
		}
	}
	// A write step waits at most maxConfirmWait after the read raise; churn can restart that
	// wait, but no topic should stay short of writable queues for most of the run.
	for i, d := range res.writeShort {
		if d > 90*time.Minute {
			t.Fatalf("topic %d had fewer writable queues than members for %v of 3 h", i, d)
		}
	}
	t.Logf("%d inputs, %d steps %v, events %v", res.inputs, sum(res.steps), res.steps, res.events)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// BenchmarkSimulatedDay runs the day over 1,000 topics and reports the figures of
// BENCHMARKS.md: ns per input (the CPU the daemon spends in the state machine per event),
// steps taken, and the distribution over topics of the time spent with fewer writable (and
// readable) queues than the largest group's members.
func BenchmarkSimulatedDay(b *testing.B) {
	var res simResult
	for b.Loop() {
		res = runSim(simConfig{topics: 1000, duration: 24 * time.Hour, seed: 1}, true)
	}
	b.ReportMetric(float64(res.inCalls.Nanoseconds())/float64(res.inputs), "ns/input")
	b.ReportMetric(float64(res.inputs), "inputs")
	b.ReportMetric(float64(sum(res.steps)), "steps")
	slices.Sort(res.callTimes)
	p := func(f float64) time.Duration { return res.callTimes[int(f*float64(len(res.callTimes)-1))] }
	w, r, x := percentiles(res.writeShort), percentiles(res.readShort), percentiles(res.readExcess)
	b.Logf("topics 1000, simulated 24h, seed 1")
	b.Logf("inputs %d (membership changes %d), in-call time %v total, %.0f ns/input; per input p50 %v p99 %v p99.9 %v max %v",
		res.inputs, res.membership, res.inCalls.Round(time.Millisecond), float64(res.inCalls.Nanoseconds())/float64(res.inputs),
		p(0.5), p(0.99), p(0.999), res.callTimes[len(res.callTimes)-1])
	for _, kind := range slices.Sorted(maps.Keys(res.byKind)) {
		ds := res.byKind[kind]
		var total time.Duration
		for _, d := range ds {
			total += d
		}
		slices.Sort(ds)
		b.Logf("  %-17s %8d inputs, mean %6.0f ns, p50 %v, p99 %v", kind, len(ds), float64(total.Nanoseconds())/float64(len(ds)),
			ds[len(ds)/2], ds[int(0.99*float64(len(ds)-1))])
	}
	b.Logf("steps %d: %v", sum(res.steps), res.steps)
	b.Logf("events: target %d, planned %d, superseded %d, cancelled %d, unconfirmed %d, not-drained %d",
		res.events[autoscale.EventTarget], res.events[autoscale.EventPlanned], res.events[autoscale.EventSuperseded],
		res.events[autoscale.EventCancelled], res.events[autoscale.EventUnconfirmed], res.events[autoscale.EventNotDrained])
	b.Logf("cancelled plans by phase: %v", res.cancelled)
	b.Logf("per topic, time per day with write < largest group: p50 %v p90 %v p99 %v max %v", rnd(w[0]), rnd(w[1]), rnd(w[2]), rnd(w[3]))
	b.Logf("per topic, time per day with read < largest group:  p50 %v p90 %v p99 %v max %v", rnd(r[0]), rnd(r[1]), rnd(r[2]), rnd(r[3]))
	b.Logf("per topic, time per day with read > largest group:  p50 %v p90 %v p99 %v max %v", rnd(x[0]), rnd(x[1]), rnd(x[2]), rnd(x[3]))
}

func rnd(d time.Duration) time.Duration { return d.Round(time.Second) }
