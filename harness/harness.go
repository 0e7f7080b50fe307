// Package harness proves an allocd strategy plugin sound: it generates consumer groups from a
// seed, asks the plugin about each, and checks every answer over the whole group. `allocd check`
// runs it on a .wasm file, the plugin registry runs Quick before a new version may serve, and a
// plugin author can run it from a go test, on the plugin loaded by the host or on a native
// implementation of Allocator:
//
//	rep, err := harness.Run(ctx, plugin, harness.Options{Seed: 1, Scenarios: 50})
//	if err != nil { t.Fatal(err) }
//	if !rep.Passed() { rep.WriteText(os.Stderr); t.Fail() }
//
// The checks (the Check* constants) are: no call fails; every answer passes abi.Validate (no
// queue given to two consumers, indices in range: the host's own rule); a consumer id that is not
// in cidAll gets nothing; every queue is given to someone unless the plugin declares "partial";
// the same request gets the same answer again, on other instances, concurrently, in any order, and
// whether a consumer is asked about alone or with the whole group; per-member counts differ by at
// most one when the plugin promises "balanced" (each is its weighted share rounded down or up when
// it also promises "weighted", PropWeighted); a queue of a zone with members goes to one of them
// when it promises "zoned" (its scenarios then give every queue and consumer a zone); and when one
// consumer joins or leaves, no queue moves between two consumers present before and after when the
// plugin promises "sticky" (beyond what the new per-member counts force). A plugin given no
// config is bound with its self-described checkConfig. Queue movement, latency and memory growth are reported
// as figures. Options.Reference compares every answer with another plugin, Options.Vectors with
// recorded RocketMQ vectors.
//
// Every failure carries the smallest scenario that still shows it, found by shrinking the first
// failing scenario (fewer consumers, fewer queues, shorter ids), as JSON that `allocd allocate`
// accepts.
//
// The package depends on abi only, so the host can use it without an import cycle.
package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allocd/allocd/abi"
)

// Allocator is what the harness checks: *host.Plugin satisfies it, and so can a native
// implementation in a plugin author's tests.
type Allocator interface {
	Allocate(ctx context.Context, req *abi.Request) (*abi.Response, error)
	Info() abi.Info
}

// MemoryReporter is implemented by an Allocator that can tell how much memory its instances
// hold. The harness prefers it to Go heap deltas for the memory figure.
type MemoryReporter interface {
	MemoryBytes() int64
}

// Options configure Run. The zero value of every field means its default.
type Options struct {
	// Seed selects the scenarios; the same seed gives the same scenarios.
	Seed uint64
	// Scenarios is the number of generated groups (default 40).
	Scenarios int
	// Config is the binding configuration every request carries.
	Config map[string]string
	// Reference, when set, must give the same answer as the plugin to every request.
	Reference Allocator
	// Vectors is a JSON-lines file of recorded RocketMQ vectors
	// (testdata/rocketmq-java-vectors-small.jsonl); the plugin must match the vectors of its
	// strategy.
	Vectors string
	// Strategy selects the vectors: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG, MACHINE_ROOM or
	// MACHINE_ROOM_NEARBY (Strategies). Empty infers it from the plugin's name (averagely,
	// circle, hash, config, machineroom, nearby).
	Strategy string
	// Concurrency is the number of goroutines of the determinism phase (default 4), so a pooled
	// plugin answers from several instances.
	Concurrency int
	// Repeats is how many more times the determinism phase asks each request (default 3).
	Repeats int
	// MaxQueues and MaxConsumers cap generated groups (DefaultMaxQueues, DefaultMaxConsumers).
	MaxQueues, MaxConsumers int
	// StabilityQueues and StabilityConsumers, when both are set, measure the movement figure on
	// Scenarios groups of exactly that size (no attributes, no previous owners) instead of on
	// the generated scenarios.
	StabilityQueues, StabilityConsumers int
	// ShrinkBudget bounds the plugin evaluations spent shrinking one failure (default 400);
	// negative disables shrinking.
	ShrinkBudget int
	// ShrinkTime bounds the time spent shrinking one failure (default 30s).
	ShrinkTime time.Duration
}

func (o Options) withDefaults() Options {
	if o.Scenarios <= 0 {
		o.Scenarios = 40
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Repeats <= 0 {
		o.Repeats = 3
	}
	if o.MaxQueues <= 0 {
		o.MaxQueues = DefaultMaxQueues
	}
	if o.MaxConsumers <= 0 {
		o.MaxConsumers = DefaultMaxConsumers
	}
	if o.ShrinkBudget == 0 {
		o.ShrinkBudget = 400
	}
	if o.ShrinkTime <= 0 {
		o.ShrinkTime = 30 * time.Second
	}
	return o
}

// The checks, in report order.
const (
	CheckErrors      = "errors"      // no call fails, no member's result is an error
	CheckValid       = "valid"       // every answer passes abi.Validate: no queue to two consumers
	CheckOutsider    = "outsider"    // a consumer id not in cidAll gets nothing
	CheckCoverage    = "coverage"    // every queue is given to someone, unless "partial"
	CheckDeterminism = "determinism" // same request, same answer: repeated, concurrent, any order
	CheckBalance     = "balance"     // max-min queues per member <= 1, when "balanced"
	CheckZones       = "zones"       // a queue of a zone with members goes to one of them, when "zoned"
	CheckStability   = "stability"   // queue movement on a join or leave; checked when "sticky"
	CheckReference   = "reference"   // same answers as Options.Reference
	CheckVectors     = "vectors"     // same answers as the recorded vectors
)

var checkOrder = []string{CheckErrors, CheckValid, CheckOutsider, CheckCoverage, CheckDeterminism, CheckBalance, CheckZones, CheckStability, CheckReference, CheckVectors}

// Check statuses.
const (
	Pass   = "pass"
	Fail   = "fail"
	Skip   = "skip"
	Figure = "figure" // measured, nothing promised
)

// Report is the outcome of Run.
type Report struct {
	Plugin    abi.Info      `json:"plugin"`
	Reference *abi.Info     `json:"reference,omitempty"`
	Seed      uint64        `json:"seed"`
	Scenarios int           `json:"scenarios"`
	Calls     int64         `json:"calls"`
	Elapsed   time.Duration `json:"elapsedNs"`
	Checks    []CheckResult `json:"checks"`
	// Stability is the movement figure: one entry for joins, one for leaves.
	Stability []Movement `json:"stability"`
	Cost      Cost       `json:"cost"`
	Failures  []*Failure `json:"failures"`
	// Host holds counters the caller adds after the run, printed with the cost (allocd check
	// adds the host's statistics of the plugin).
	Host []Counter `json:"host,omitempty"`
}

// Counter is one named figure of Report.Host.
type Counter struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Passed reports whether no check failed.
func (r *Report) Passed() bool { return len(r.Failures) == 0 }

// Check returns the result of check name.
func (r *Report) Check(name string) CheckResult {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return CheckResult{Name: name, Status: Skip}
}

// CheckResult is the verdict of one check.
type CheckResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	// Failures counts the failing answers (scenarios, rounds or vectors); Of, for a check
	// counted that way, how many were checked.
	Failures int `json:"failures,omitempty"`
	Of       int `json:"of,omitempty"`
}

// Failure is one failed check with the smallest scenario that still shows it.
type Failure struct {
	Check string `json:"check"`
	// Reason says what is wrong, on Scenario.
	Reason string `json:"reason"`
	// FirstSeen names the scenario where the failure was found, and its reason there.
	FirstSeen string `json:"firstSeen"`
	// Occurrences is how many scenarios, calls or vectors failed this check.
	Occurrences int `json:"occurrences"`
	// Scenario is the smallest scenario found that still fails (for a stability failure, the
	// group before Event).
	Scenario *Scenario `json:"scenario"`
	Event    *Event    `json:"event,omitempty"`
	// Shrunk tells whether Scenario is smaller than the scenario first seen.
	Shrunk bool `json:"shrunk"`

	cause error // Unwrap's
}

// Unwrap is the plugin's error when the failure is a call that failed: errors.Is(err,
// context.DeadlineExceeded) tells one that ran out of time (the registry tries such a version
// again), errors.As finds the host's Error.
func (f *Failure) Unwrap() error { return f.cause }

func (f *Failure) Error() string {
	s := "harness: " + f.Check + ": " + f.Reason
	if f.Scenario != nil {
		s += " (scenario: " + f.Scenario.Size()
		if f.Event != nil {
			s += ", then " + f.Event.Kind + " of " + fmt.Sprintf("%q", f.Event.Consumer)
		}
		s += ")"
	}
	return s
}

// Movement is the stability figure for one kind of event, summed over its rounds.
type Movement struct {
	Event  string `json:"event"`
	Rounds int    `json:"rounds"`
	// Queues is the number of queues of all rounds.
	Queues int `json:"queues"`
	// Moved counts queues whose owner changed (a queue of the leaver counts: it had to move).
	Moved int `json:"moved"`
	// Minimum is what had to move: on a leave, the leaver's queues; on a join, the newcomer's
	// fair share, floor(queues / members after).
	Minimum int `json:"minimum"`
	// BetweenStayers counts queues moved between two consumers present before and after.
	BetweenStayers int `json:"betweenStayers"`
	// Forced is how many of those the per-member counts after the change force (a member that
	// must shed queues while the newcomer is full).
	Forced int `json:"forced"`
}

// Ratio is Moved / Minimum (0 when Minimum is 0).
func (m Movement) Ratio() float64 {
	if m.Minimum == 0 {
		return 0
	}
	return float64(m.Moved) / float64(m.Minimum)
}

// Cost holds the performance figures.
type Cost struct {
	// Calls is the number of sequential plugin calls timed (the concurrent phase is not).
	Calls int           `json:"calls"`
	P50   time.Duration `json:"p50Ns"`
	P90   time.Duration `json:"p90Ns"`
	P99   time.Duration `json:"p99Ns"`
	Max   time.Duration `json:"maxNs"`
	// MemorySource says what MemoryBefore and MemoryAfter measure: "host" (the Allocator is a
	// MemoryReporter) or "go-heap" (live Go heap after a GC, which includes the plugin
	// instances' linear memory: wazero allocates it on the Go heap).
	MemorySource string `json:"memorySource"`
	MemoryBefore int64  `json:"memoryBefore"`
	MemoryAfter  int64  `json:"memoryAfter"`
}

// MemoryGrowth is MemoryAfter - MemoryBefore.
func (c Cost) MemoryGrowth() int64 { return c.MemoryAfter - c.MemoryBefore }

// Run checks p over Options.Scenarios generated groups (and the vectors, and against the
// reference, when set). Failures of the plugin are in the report; the error is for what kept
// the run from happening (a vector file that cannot be read, a canceled context).
func Run(ctx context.Context, p Allocator, opts Options) (*Report, error) {
	r := newRunner(ctx, p, opts.withDefaults())
	return r.run()
}

// Quick is the handful-of-scenarios pass a new plugin version must pass before it may serve:
// no failed calls, valid answers (no double assignment), coverage unless "partial", an outsider
// gets nothing, determinism (each request asked again with fresh request copies, concurrently),
// balance when "balanced", stickiness when "sticky". It returns the first failure (a *Failure) or
// nil, and takes a few milliseconds per scenario.
func Quick(ctx context.Context, p Allocator, config map[string]string) error {
	_, err := QuickReport(ctx, p, config)
	return err
}

// QuickReport is Quick with its report (nil when the run could not start).
func QuickReport(ctx context.Context, p Allocator, config map[string]string) (*Report, error) {
	r := newRunner(ctx, p, Options{
		Seed: 0x9e3779b97f4a7c15, Scenarios: 8, Config: config, MaxQueues: 300, MaxConsumers: 40,
		Repeats: 1, Concurrency: 2, ShrinkBudget: -1,
	}.withDefaults())
	r.quick = true
	rep, err := r.run()
	if err != nil {
		return rep, err
	}
	if len(rep.Failures) > 0 {
		return rep, rep.Failures[0]
	}
	return rep, nil
}

type runner struct {
	ctx   context.Context
	p     Allocator
	ref   Allocator
	opts  Options
	info  abi.Info
	quick bool
	calls atomic.Int64

	mu      sync.Mutex // guards found and counts (the determinism phase records concurrently)
	found   map[string]*found
	counts  map[string]int
	latency []time.Duration

	// figures of the checks
	answers, outsiders, coverageScenarios, queues, unassigned int
	balanceScenarios, maxSpread                               int
	zonedQueues, awayQueues, zoneAnswers                      int
	weightedScenarios                                         int
	maxWeightOff                                              float64
	detScenarios                                              int
	detCalls, refCompared                                     int
	stickyRounds                                              int
	vectorsDetail                                             string
	moves                                                     map[string]*Movement
}

// found is the first failure of a check, before shrinking.
type found struct {
	reason, where string
	cause         error // the plugin's error, for a call that failed
	sc            *Scenario
	ev            *Event
}

func newRunner(ctx context.Context, p Allocator, opts Options) *runner {
	return &runner{
		ctx: ctx, p: p, ref: opts.Reference, opts: opts, info: p.Info(),
		found: map[string]*found{}, counts: map[string]int{},
		moves: map[string]*Movement{Join: {Event: Join}, Leave: {Event: Leave}},
	}
}

func (r *runner) fail(check, reason, where string, sc *Scenario, ev *Event) {
	r.failWith(check, reason, nil, where, sc, ev)
}

// failWith is fail for a problem with the plugin's error as its cause.
func (r *runner) failWith(check, reason string, cause error, where string, sc *Scenario, ev *Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[check]++
	if r.found[check] == nil {
		r.found[check] = &found{reason: reason, cause: cause, where: where, sc: sc, ev: ev}
	}
}

func (r *runner) run() (*Report, error) {
	start := time.Now()
	rep := &Report{Plugin: r.info, Seed: r.opts.Seed, Scenarios: r.opts.Scenarios, Failures: []*Failure{}}
	if r.ref != nil {
		ri := r.ref.Info()
		rep.Reference = &ri
	}
	var memSource string
	var memBefore int64
	if !r.quick { // a full GC would be a needless cost on the hot-reload path that runs Quick
		memSource, memBefore = r.memory()
	}

	// Phase 1: every scenario once, checked over the whole group, and a join and a leave.
	type kept struct {
		idx int
		sc  *Scenario
		req *abi.Request
		rsp *abi.Response
	}
	var keep []kept
	fixed := r.opts.StabilityQueues > 0 && r.opts.StabilityConsumers > 0
	for i := 0; i < r.opts.Scenarios; i++ {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		sc := generate(r.opts.Seed, i, r.opts.MaxQueues, r.opts.MaxConsumers, true)
		r.bind(sc, i)
		where := fmt.Sprintf("scenario %d (%s)", i, sc.Size())
		o := r.evaluate(sc, true)
		r.record(o, where, sc)
		if !o.ok() {
			continue
		}
		keep = append(keep, kept{i, sc, o.req, o.resp})
		rng := rand.New(rand.NewPCG(r.opts.Seed^0x5851f42d4c957f2d, uint64(i)))
		for _, ev := range r.events(rng, sc) {
			r.stabilityRound(sc, o, ev, fmt.Sprintf("scenario %d (%s) then %s of %q", i, sc.Size(), ev.Kind, ev.Consumer), !fixed)
		}
	}
	if fixed && !r.quick {
		for i := 0; i < r.opts.Scenarios; i++ {
			if err := r.ctx.Err(); err != nil {
				return nil, err
			}
			rng := rand.New(rand.NewPCG(r.opts.Seed, uint64(i)|1<<40))
			sc := sized(rng, r.opts.StabilityQueues, r.opts.StabilityConsumers)
			r.bind(sc, i)
			where := fmt.Sprintf("movement group %d (%s)", i, sc.Size())
			o := r.evaluate(sc, true)
			r.record(o, where, sc)
			if !o.ok() {
				continue
			}
			for _, ev := range r.events(rng, sc) {
				r.stabilityRound(sc, o, ev, fmt.Sprintf("%s then %s of %q", where, ev.Kind, ev.Consumer), true)
			}
		}
	}

	// Phase 2: determinism. Every kept request again, Repeats times, alone for one member and
	// with its targets shuffled, all in shuffled order from several goroutines.
	type job struct {
		k     int
		build func() *abi.Request
		check func(req *abi.Request, resp *abi.Response) string
	}
	var jobs []job
	rng := rand.New(rand.NewPCG(r.opts.Seed, 0xde7e))
	for k, kp := range keep {
		for range r.opts.Repeats {
			jobs = append(jobs, job{k, kp.sc.Request, func(_ *abi.Request, resp *abi.Response) string {
				return sameAnswer(kp.req, kp.rsp, resp)
			}})
		}
		members := kp.req.Consumers
		m := members[rng.IntN(len(members))]
		jobs = append(jobs, job{k, func() *abi.Request {
			req := kp.sc.Request()
			req.Targets = []string{m}
			return req
		}, func(req *abi.Request, resp *abi.Response) string {
			return sameForTargets(kp.req, kp.rsp, req, resp, "when asked with the whole group", "when asked alone")
		}})
		if len(members) > 1 {
			perm := rng.Perm(len(members))
			jobs = append(jobs, job{k, func() *abi.Request {
				req := kp.sc.Request()
				req.Targets = make([]string, len(perm))
				for i, p := range perm {
					req.Targets[i] = members[p]
				}
				return req
			}, func(req *abi.Request, resp *abi.Response) string {
				return sameForTargets(kp.req, kp.rsp, req, resp, "with the targets in cidAll order", "with them shuffled")
			}})
		}
	}
	rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	var next atomic.Int64
	var wg sync.WaitGroup
	failed := make([]atomic.Bool, len(keep))
	for range min(r.opts.Concurrency, max(1, len(jobs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= len(jobs) || r.ctx.Err() != nil {
					return
				}
				j := jobs[n]
				req := j.build()
				resp, err := r.p.Allocate(r.ctx, req)
				r.calls.Add(1)
				var reason string
				if err != nil {
					reason = "a repeated call failed where the first succeeded: " + err.Error()
				} else {
					reason = j.check(req, resp)
				}
				if reason != "" && failed[j.k].CompareAndSwap(false, true) {
					kp := keep[j.k]
					r.fail(CheckDeterminism, reason, fmt.Sprintf("scenario %d (%s)", kp.idx, kp.sc.Size()), kp.sc, nil)
				}
			}
		}()
	}
	wg.Wait()
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	r.detCalls, r.detScenarios = len(jobs), len(keep)

	// Phase 3: recorded vectors.
	if r.opts.Vectors != "" && !r.quick {
		if err := r.vectors(); err != nil {
			return nil, err
		}
	}

	memAfter := memBefore
	if !r.quick {
		_, memAfter = r.memory()
	}
	rep.Cost = r.cost(memSource, memBefore, memAfter)
	rep.Stability = []Movement{*r.moves[Join], *r.moves[Leave]}

	// Shrink each check's first failure to the smallest scenario that still shows it.
	for _, check := range checkOrder {
		f := r.found[check]
		if f == nil {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		rep.Failures = append(rep.Failures, r.minimize(check, f))
	}
	rep.Checks = r.verdicts()
	rep.Calls = r.calls.Load()
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// config is the binding config of every request: Options.Config, or, when that is empty, the
// plugin's own CheckConfig.
func (r *runner) config() map[string]string {
	src := r.opts.Config
	if len(src) == 0 {
		src = r.info.CheckConfig
	}
	if len(src) == 0 {
		return nil
	}
	c := make(map[string]string, len(src))
	for k, v := range src {
		c[k] = v
	}
	return c
}

// bind completes generated scenario index for the plugin: the binding config, and, for a plugin
// that declares "zoned", a zone on every queue and consumer that lacks one. Zones are dealt so
// that some scenarios have a zone of queues without consumers, and one of consumers without
// queues.
func (r *runner) bind(sc *Scenario, index int) {
	sc.Config = r.config()
	if !r.info.Has(abi.PropZoned) {
		return
	}
	k := 1 + index%len(zoneNames)
	fill := func(attrs []abi.Attrs, n, shift int) []abi.Attrs {
		if attrs == nil {
			attrs = make([]abi.Attrs, n)
		}
		for i := range attrs {
			if attrs[i].Labels["zone"] != "" {
				continue
			}
			if attrs[i].Labels == nil {
				attrs[i].Labels = map[string]string{}
			}
			attrs[i].Labels["zone"] = zoneNames[(i+shift)%k]
		}
		return attrs
	}
	sc.QueueAttrs = fill(sc.QueueAttrs, len(sc.MQAll), 0)
	sc.ConsumerAttrs = fill(sc.ConsumerAttrs, len(sc.CIDAll), index%2)
}

// events picks a join (a new consumer) and, with two members or more, a leave.
func (r *runner) events(rng *rand.Rand, sc *Scenario) []Event {
	taken := sc.CIDAll
	if sc.Outsider != "" {
		taken = append(slices.Clone(taken), sc.Outsider)
	}
	evs := []Event{{Kind: Join, Consumer: newConsumerID(rng, taken)}}
	if len(sc.CIDAll) > 1 {
		evs = append(evs, Event{Kind: Leave, Consumer: sc.CIDAll[rng.IntN(len(sc.CIDAll))]})
	}
	return evs
}

func (r *runner) memory() (string, int64) {
	if m, ok := r.p.(MemoryReporter); ok {
		return "host", m.MemoryBytes()
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return "go-heap", int64(ms.HeapAlloc)
}

func (r *runner) cost(source string, before, after int64) Cost {
	c := Cost{Calls: len(r.latency), MemorySource: source, MemoryBefore: before, MemoryAfter: after}
	if len(r.latency) == 0 {
		return c
	}
	d := slices.Clone(r.latency)
	slices.Sort(d)
	at := func(p int) time.Duration { // nearest rank
		i := (p*len(d)+99)/100 - 1
		return d[max(0, min(i, len(d)-1))]
	}
	c.P50, c.P90, c.P99, c.Max = at(50), at(90), at(99), d[len(d)-1]
	return c
}

// outcome is one evaluated call.
type outcome struct {
	req      *abi.Request
	resp     *abi.Response // nil when the call failed or the answer is invalid
	problems []problem
	// figures
	outsider, covered  bool
	unassigned, spread int
	zoned, away        int // queues of a zone with members; of them, given outside it
	refCompared        bool
	weights            bool    // some consumer carries a weight
	weightOff          float64 // the largest distance from a weighted share, when weights
}

type problem struct {
	check, reason string
	cause         error // the plugin's error, for a call that failed
}

// ok reports whether the answer is usable for the determinism and stability phases.
func (o *outcome) ok() bool {
	if o.resp == nil {
		return false
	}
	for _, p := range o.problems {
		if p.check == CheckErrors {
			return false
		}
	}
	return true
}

func (o *outcome) reason(check string) string {
	for _, p := range o.problems {
		if p.check == check {
			return p.reason
		}
	}
	return ""
}

// call asks the plugin about sc, timing the call when timed.
func (r *runner) call(sc *Scenario, timed bool) (*abi.Request, *abi.Response, error) {
	req := sc.Request()
	start := time.Now()
	resp, err := r.p.Allocate(r.ctx, req)
	if timed {
		r.latency = append(r.latency, time.Since(start))
	}
	r.calls.Add(1)
	return req, resp, err
}

// evaluate asks the plugin about sc and runs every per-answer check on the answer.
func (r *runner) evaluate(sc *Scenario, timed bool) *outcome {
	req, resp, err := r.call(sc, timed)
	o := &outcome{req: req}
	if err != nil {
		var ae *abi.Error
		if errors.As(err, &ae) {
			o.problems = append(o.problems, problem{check: CheckValid, reason: ae.Error()})
		} else {
			o.problems = append(o.problems, problem{check: CheckErrors, reason: "the call failed: " + err.Error(), cause: err})
		}
		return o
	}
	if err := abi.ValidateFor(&r.info, req, resp); err != nil {
		o.problems = append(o.problems, problem{check: CheckValid, reason: err.Error()})
		return o
	}
	o.resp = resp
	members := make(map[string]bool, len(req.Consumers))
	for _, c := range req.Consumers {
		members[c] = true
	}
	memberFailed := false
	for t, res := range resp.Results {
		id := req.Target(t)
		if !members[id] {
			o.outsider = true
			if !res.Failed && len(res.Indices) > 0 && o.reason(CheckOutsider) == "" {
				o.problems = append(o.problems, problem{check: CheckOutsider, reason: fmt.Sprintf(
					"consumer %q is not in cidAll but is given %s", id, plural(len(res.Indices), "queue"))})
			}
			continue
		}
		if res.Failed && !memberFailed {
			memberFailed = true
			o.problems = append(o.problems, problem{check: CheckErrors, reason: fmt.Sprintf("consumer %q: the plugin answered the error %q", id, res.Err)})
		}
	}
	if memberFailed || len(req.Consumers) == 0 || sc.CID != "" {
		return o // coverage and balance are properties of whole-group answers
	}
	owners := ownersOf(req, resp)
	first := -1
	for i, w := range owners {
		if w == "" {
			o.unassigned++
			if first < 0 {
				first = i
			}
		}
	}
	o.covered = true
	if o.unassigned > 0 && !r.info.Has(abi.PropPartial) {
		o.problems = append(o.problems, problem{check: CheckCoverage, reason: fmt.Sprintf(
			"%d of %d queues are given to nobody, first queue %d (%s); the plugin does not declare %q",
			o.unassigned, len(owners), first, req.Queues[first], abi.PropPartial)})
	}
	// Balance over the distinct members.
	count := make(map[string]int, len(req.Consumers))
	for _, c := range req.Consumers {
		count[c] = 0
	}
	for _, w := range owners {
		if w != "" {
			count[w]++
		}
	}
	lo, hi := req.Consumers[0], req.Consumers[0]
	for _, c := range req.Consumers {
		if count[c] < count[lo] {
			lo = c
		}
		if count[c] > count[hi] {
			hi = c
		}
	}
	o.spread = count[hi] - count[lo]
	assigned := len(owners) - o.unassigned
	worst, off, within := weightedOff(req, count, assigned)
	if o.weights = hasWeights(req); o.weights {
		o.weightOff = off
	}
	switch {
	case r.weightedPromise():
		if !within {
			w, total := weightedShares(req)
			o.problems = append(o.problems, problem{check: CheckBalance, reason: fmt.Sprintf(
				"consumer %q (weight %d of %d) has %s where its weighted share is %.2f, and the plugin promises %q and %q",
				worst, w[worst], total, plural(count[worst], "queue"), share(req, worst, assigned), abi.PropBalanced, PropWeighted)})
		}
	case o.spread > 1 && r.info.Has(abi.PropBalanced):
		o.problems = append(o.problems, problem{check: CheckBalance, reason: fmt.Sprintf(
			"consumer %q has %s and %q has %d: max-min is %d, and the plugin promises %q",
			hi, plural(count[hi], "queue"), lo, count[lo], o.spread, abi.PropBalanced)})
	}
	if reason := o.zones(owners); reason != "" && r.info.Has(abi.PropZoned) {
		o.problems = append(o.problems, problem{check: CheckZones, reason: reason + fmt.Sprintf(", and the plugin promises %q", abi.PropZoned)})
	}
	if r.ref != nil && !r.quick {
		o.refCompared = true
		rreq := sc.Request()
		rresp, err := r.ref.Allocate(r.ctx, rreq)
		switch {
		case err != nil:
			o.problems = append(o.problems, problem{check: CheckReference, reason: "the reference failed: " + err.Error()})
		default:
			if d := diffAnswers(req, resp, rresp, "plugin", "reference"); d != "" {
				o.problems = append(o.problems, problem{check: CheckReference, reason: d})
			}
		}
	}
	return o
}

// zones counts the assigned queues whose label "zone" some member shares, and those of them given
// to a member of another zone (or of none), returning a reason naming the first.
func (o *outcome) zones(owners []string) string {
	req := o.req
	if req.QueueAttrs == nil || req.ConsumerAttrs == nil {
		return ""
	}
	zoneOf := make(map[string]string, len(req.Consumers)) // member -> zone of its first index
	hasMembers := map[string]bool{}
	for j, c := range req.Consumers {
		z, ok := req.ConsumerAttrs[j].Labels["zone"]
		if _, seen := zoneOf[c]; !seen {
			zoneOf[c] = z
		}
		if ok && z != "" {
			hasMembers[z] = true
		}
	}
	reason := ""
	for i, w := range owners {
		z := req.QueueAttrs[i].Labels["zone"]
		if w == "" || z == "" || !hasMembers[z] {
			continue // unassigned queues are coverage's matter
		}
		o.zoned++
		if zoneOf[w] != z {
			o.away++
			if reason == "" {
				reason = fmt.Sprintf("queue %d (%s) of zone %q is given to %q of zone %q, though zone %q has members", i, req.Queues[i], z, w, zoneOf[w], z)
			}
		}
	}
	return reason
}

// record files the problems of an outcome, and its figures.
func (r *runner) record(o *outcome, where string, sc *Scenario) {
	r.answers++
	if o.outsider {
		r.outsiders++
	}
	if o.covered {
		r.coverageScenarios++
		r.queues += len(o.req.Queues)
		r.unassigned += o.unassigned
		r.balanceScenarios++
		r.maxSpread = max(r.maxSpread, o.spread)
		r.zonedQueues += o.zoned
		r.awayQueues += o.away
		if o.zoned > 0 {
			r.zoneAnswers++
		}
		if o.weights {
			r.weightedScenarios++
			r.maxWeightOff = max(r.maxWeightOff, o.weightOff)
		}
	}
	if o.refCompared {
		r.refCompared++
	}
	for _, p := range o.problems {
		r.failWith(p.check, p.reason, p.cause, where, sc, nil)
	}
}

// stabilityRound applies ev to sc, whose answer is before, asks the plugin about the group after
// (with each queue's previous owner from before), checks that answer like any other, and
// measures the movement (adding it to the figure when figure is set).
func (r *runner) stabilityRound(sc *Scenario, before *outcome, ev Event, where string, figure bool) {
	mv, after, reason := r.movement(sc, before, ev, true)
	if after == nil {
		return
	}
	r.record(after.o, where, after.sc)
	if !after.o.ok() {
		return
	}
	if figure {
		m := r.moves[ev.Kind]
		m.Rounds++
		m.Queues += len(sc.MQAll)
		m.Moved += mv.Moved
		m.Minimum += mv.Minimum
		m.BetweenStayers += mv.BetweenStayers
		m.Forced += mv.Forced
	}
	r.stickyRounds++
	if reason != "" {
		r.fail(CheckStability, reason, where, sc, &ev)
	}
}

type afterState struct {
	sc *Scenario
	o  *outcome
}

// movement measures what ev moves. The reason is set when the plugin promises "sticky" and more
// queues moved between stayers than the counts force.
func (r *runner) movement(sc *Scenario, before *outcome, ev Event, timed bool) (Movement, *afterState, string) {
	owners := ownersOf(before.req, before.resp)
	asc := sc.after(ev, owners)
	ao := r.evaluate(asc, timed)
	if !ao.ok() {
		return Movement{}, &afterState{asc, ao}, ""
	}
	now := ownersOf(ao.req, ao.resp)
	stayer := func(id string) bool { return id != "" && id != ev.Consumer }
	var mv Movement
	cntBefore, cntAfter := map[string]int{}, map[string]int{}
	unassignedAfter := 0
	firstMove := -1
	for q := range owners {
		b, a := owners[q], now[q]
		cntBefore[b]++
		cntAfter[a]++
		if a == "" {
			unassignedAfter++
		}
		if b != "" && a != b {
			mv.Moved++
		}
		if b != a && stayer(b) && stayer(a) {
			mv.BetweenStayers++
			if firstMove < 0 {
				firstMove = q
			}
		}
	}
	distinct := map[string]bool{}
	for _, c := range asc.CIDAll {
		distinct[c] = true
	}
	switch ev.Kind {
	case Leave:
		mv.Minimum = cntBefore[ev.Consumer]
	case Join:
		mv.Minimum = len(owners) / max(1, len(distinct))
	}
	shed := 0
	for id, n := range cntBefore {
		if stayer(id) {
			shed += max(0, n-cntAfter[id])
		}
	}
	// Whatever a stayer lost went to another stayer, to the newcomer, or to nobody.
	mv.Forced = max(0, shed-cntAfter[ev.Consumer]-unassignedAfter)
	reason := ""
	if r.info.Has(abi.PropSticky) && mv.BetweenStayers > mv.Forced {
		reason = fmt.Sprintf("%s moved between consumers present before and after the %s of %q (the new counts force %d); first: queue %d (%s) from %q to %q, and the plugin promises %q",
			plural(mv.BetweenStayers, "queue"), ev.Kind, ev.Consumer, mv.Forced, firstMove, sc.MQAll[firstMove], owners[firstMove], now[firstMove], abi.PropSticky)
	}
	return mv, &afterState{asc, ao}, reason
}

// sameAnswer compares a repeated call's answer with the first.
func sameAnswer(req *abi.Request, want, got *abi.Response) string {
	if len(want.Results) != len(got.Results) {
		return fmt.Sprintf("the same request got %d results, then %d", len(want.Results), len(got.Results))
	}
	for t := range want.Results {
		if !sameResult(want.Results[t], got.Results[t]) {
			return fmt.Sprintf("the same request answered differently: consumer %q got %s, then %s",
				req.Target(t), formatResult(want.Results[t]), formatResult(got.Results[t]))
		}
	}
	return ""
}

// sameForTargets checks that every target of req gets what it got in the first answer.
func sameForTargets(firstReq *abi.Request, first *abi.Response, req *abi.Request, resp *abi.Response, howFirst, how string) string {
	for t := range resp.Results {
		id := req.Target(t)
		ft := -1
		for i := 0; i < firstReq.NumTargets(); i++ {
			if firstReq.Target(i) == id {
				ft = i
				break
			}
		}
		if ft < 0 {
			continue
		}
		if !sameResult(first.Results[ft], resp.Results[t]) {
			return fmt.Sprintf("consumer %q gets %s %s, and %s %s", id, formatResult(first.Results[ft]), howFirst, formatResult(resp.Results[t]), how)
		}
	}
	return ""
}

func sameResult(a, b abi.Result) bool {
	return a.Failed == b.Failed && a.Err == b.Err && slices.Equal(a.Indices, b.Indices)
}

// diffAnswers compares two answers to the same request, naming the first consumer that differs.
func diffAnswers(req *abi.Request, a, b *abi.Response, an, bn string) string {
	if len(a.Results) != len(b.Results) {
		return fmt.Sprintf("%s gives %d results, %s %d", an, len(a.Results), bn, len(b.Results))
	}
	n, first := 0, ""
	for t := range a.Results {
		if !sameResult(a.Results[t], b.Results[t]) {
			n++
			if first == "" {
				first = fmt.Sprintf("consumer %q: %s %s, %s %s", req.Target(t), an, formatResult(a.Results[t]), bn, formatResult(b.Results[t]))
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d consumers get a different answer from the %s; first %s", n, len(a.Results), bn, first)
}

// weightedPromise reports whether the plugin promises balance by weight.
func (r *runner) weightedPromise() bool {
	return r.info.Has(abi.PropBalanced) && r.info.Has(PropWeighted)
}

// verdicts turns the figures and failures into one result per check. A detail reads as a
// sentence after the check's name and status: "valid ok: 45 of 45 answers pass abi.Validate",
// "valid FAIL: 8 of 45 answers fail abi.Validate".
func (r *runner) verdicts() []CheckResult {
	var out []CheckResult
	// tally is a check counted over of answers (rounds, scenarios, ...): passed reads how many
	// passed, failed how many failed.
	tally := func(name string, of int, passed, failed string) {
		n := r.counts[name]
		c := CheckResult{Name: name, Status: Pass, Detail: fmt.Sprintf("%d of %d %s", of, of, passed), Failures: n, Of: of}
		if n > 0 {
			c.Status, c.Detail = Fail, fmt.Sprintf("%d of %d %s", n, of, failed)
		}
		out = append(out, c)
	}
	other := func(name, status, detail string) {
		c := CheckResult{Name: name, Status: status, Detail: detail, Failures: r.counts[name]}
		if c.Failures > 0 {
			c.Status = Fail
		}
		out = append(out, c)
	}
	tally(CheckErrors, r.answers, "answers came back with no failed call and no member's result an error",
		"answers failed: the call failed, or a member's result is an error")
	if r.info.Has(abi.PropOverlapping) {
		tally(CheckValid, r.answers, fmt.Sprintf("answers pass abi.ValidateFor (indices in range; the plugin declares %q)", abi.PropOverlapping),
			fmt.Sprintf("answers fail abi.ValidateFor (indices in range; the plugin declares %q)", abi.PropOverlapping))
	} else {
		tally(CheckValid, r.answers, "answers pass abi.Validate (indices in range, no queue given to two consumers)",
			"answers fail abi.Validate (indices in range, no queue given to two consumers)")
	}
	if r.outsiders > 0 {
		tally(CheckOutsider, r.outsiders, "consumer ids not in cidAll got nothing", "consumer ids not in cidAll were given queues")
	} else {
		other(CheckOutsider, Skip, "no scenario asked for a consumer outside cidAll")
	}
	if r.info.Has(abi.PropPartial) {
		assigned := "every queue"
		if r.queues > 0 && r.unassigned > 0 {
			assigned = fmt.Sprintf("%.1f%% of queues", 100*float64(r.queues-r.unassigned)/float64(r.queues))
		}
		other(CheckCoverage, Figure, fmt.Sprintf("%s assigned over %d whole-group answers (the plugin declares %q)", assigned, r.coverageScenarios, abi.PropPartial))
	} else {
		tally(CheckCoverage, r.coverageScenarios, "whole-group answers give every queue to someone", "whole-group answers leave queues to nobody")
	}
	tally(CheckDeterminism, r.detScenarios,
		fmt.Sprintf("scenarios got the first answer again in %d more calls (repeated, alone, shuffled targets; %d goroutines, shuffled order)", r.detCalls, r.opts.Concurrency),
		fmt.Sprintf("scenarios got a different answer when asked again (%d more calls: repeated, alone, shuffled targets)", r.detCalls))
	weights := fmt.Sprintf("%d of them with weights", r.weightedScenarios)
	switch {
	case r.weightedPromise():
		tally(CheckBalance, r.balanceScenarios,
			fmt.Sprintf("whole-group answers give each member its weighted share rounded down or up (%s; promised: %q, %q)", weights, abi.PropBalanced, PropWeighted),
			fmt.Sprintf("whole-group answers give a member more or less than its weighted share rounded up or down (%s; promised: %q, %q)", weights, abi.PropBalanced, PropWeighted))
	case r.info.Has(abi.PropBalanced):
		tally(CheckBalance, r.balanceScenarios,
			fmt.Sprintf("whole-group answers have max-min <= 1 queues per member (promised: %q; weights ignored: %q not promised)", abi.PropBalanced, PropWeighted),
			fmt.Sprintf("whole-group answers have max-min > 1 queues per member (promised: %q)", abi.PropBalanced))
	default:
		detail := fmt.Sprintf("max-min up to %d queues per member over %d whole-group answers", r.maxSpread, r.balanceScenarios)
		if r.weightedScenarios > 0 {
			detail += fmt.Sprintf("; up to %.1f queues from a member's weighted share in the %d with weights", r.maxWeightOff, r.weightedScenarios)
		}
		other(CheckBalance, Figure, detail+fmt.Sprintf(" (%q not promised)", abi.PropBalanced))
	}
	if r.info.Has(abi.PropZoned) {
		tally(CheckZones, r.zoneAnswers,
			fmt.Sprintf("whole-group answers give each queue of a zone with members to one of them (%d queues; promised: %q)", r.zonedQueues, abi.PropZoned),
			fmt.Sprintf("whole-group answers give a queue of a zone with members to a member of another zone (promised: %q)", abi.PropZoned))
	} else {
		other(CheckZones, Figure, fmt.Sprintf("%d of %d queues of zones with members given outside their zone (%q not promised)", r.awayQueues, r.zonedQueues, abi.PropZoned))
	}
	var parts []string
	for _, ev := range []string{Join, Leave} {
		m := r.moves[ev]
		if m.Rounds == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d moved / %d minimum (%.2fx), %d between stayers over %d rounds", ev, m.Moved, m.Minimum, m.Ratio(), m.BetweenStayers, m.Rounds))
	}
	detail := "no rounds"
	if len(parts) > 0 {
		detail = strings.Join(parts, "; ")
	}
	if r.info.Has(abi.PropSticky) {
		tally(CheckStability, r.stickyRounds,
			fmt.Sprintf("join and leave rounds moved no queue between stayers beyond what the counts force (%q promised); %s", abi.PropSticky, detail),
			fmt.Sprintf("join and leave rounds moved queues between stayers beyond what the counts force (%q promised); %s", abi.PropSticky, detail))
	} else {
		other(CheckStability, Figure, detail)
	}
	switch {
	case r.ref == nil:
		other(CheckReference, Skip, "no reference plugin")
	case r.quick:
		other(CheckReference, Skip, "not in the quick pass")
	default:
		ri := r.ref.Info()
		tally(CheckReference, r.refCompared, fmt.Sprintf("whole-group answers equal to %s %s's", ri.Name, ri.Version),
			fmt.Sprintf("whole-group answers differ from %s %s's", ri.Name, ri.Version))
	}
	if r.opts.Vectors == "" || r.quick {
		other(CheckVectors, Skip, "no vectors")
	} else {
		other(CheckVectors, Pass, r.vectorsDetail)
	}
	return out
}
