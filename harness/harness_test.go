package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/plugins/rocketmq"
	"github.com/allocd/allocd/plugins/sticky"
)

const vectorsPath = "../testdata/rocketmq-java-vectors-small.jsonl"

// One runtime for the test process, with a compiled-code cache: compiling a Go guest under the
// race detector takes 5-15 s, so each module is compiled once. The cache folder is the one
// cmd/allocd's tests give `allocd check` and `allocd allocate`, and it outlives the process: the
// cache key is the module's content (and the CPU), so a module compiled by either package, in this
// run or an earlier one, loads in a fraction of a second.
var (
	rtOnce   sync.Once
	rt       *host.Runtime
	rtErr    error
	cacheDir = filepath.Join(os.TempDir(), "allocd-test-cache")
	loadMu   sync.Mutex
	loaded   = map[string]*host.Plugin{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	loadMu.Lock()
	for _, p := range loaded {
		p.Close(context.Background())
	}
	loadMu.Unlock()
	if rt != nil {
		rt.Close(context.Background())
	}
	wasmbuild.Cleanup()
	os.Exit(code)
}

// plugin loads the plugin built from pkg once per test process.
func plugin(t *testing.T, pkg string) *host.Plugin {
	t.Helper()
	rtOnce.Do(func() {
		rt, rtErr = host.NewRuntime(context.Background(), host.Config{CacheDir: cacheDir, MaxInstances: 4, Timeout: raceSlowdown * host.DefaultTimeout})
	})
	if rtErr != nil {
		t.Fatal(rtErr)
	}
	loadMu.Lock()
	defer loadMu.Unlock()
	if p := loaded[pkg]; p != nil {
		return p
	}
	p, err := rt.Load(context.Background(), pkg, wasmbuild.Bytes(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	loaded[pkg] = p
	return p
}

// native is an Allocator in plain Go, shaped like the SDK: prepare runs once per request, and
// its function once per target (self is the target's first index in cidAll, or -1).
type native struct {
	info    abi.Info
	prepare func(req *abi.Request) func(self int) []int
}

func (n *native) Info() abi.Info { return n.info }

func (n *native) Allocate(_ context.Context, req *abi.Request) (*abi.Response, error) {
	abi.Canonicalize(req)
	f := n.prepare(req)
	resp := &abi.Response{}
	for t := range req.NumTargets() {
		cid := req.Target(t)
		if err := rocketmq.Check(cid, len(req.Queues), len(req.Consumers)); err != nil {
			resp.Results = append(resp.Results, abi.Result{Failed: true, Err: err.Error()})
			continue
		}
		resp.Results = append(resp.Results, abi.Result{Indices: f(slices.Index(req.Consumers, cid))})
	}
	return resp, nil
}

// perTarget makes a native plugin of a per-consumer function.
func perTarget(info abi.Info, f func(req *abi.Request, self int) []int) *native {
	return &native{info, func(req *abi.Request) func(int) []int {
		return func(self int) []int { return f(req, self) }
	}}
}

func nativeAveragely() *native {
	return perTarget(abi.Info{Name: "averagely", Version: "native", Properties: []string{abi.PropBalanced}},
		func(req *abi.Request, self int) []int {
			return averagely.Allocate(nil, len(req.Queues), len(req.Consumers), self)
		})
}

func nativeCircle() *native {
	return perTarget(abi.Info{Name: "circle", Version: "native", Properties: []string{abi.PropBalanced}},
		func(req *abi.Request, self int) []int {
			return circle.Allocate(nil, len(req.Queues), len(req.Consumers), self)
		})
}

func nativeSticky() *native {
	return &native{abi.Info{Name: "sticky", Version: "native", Properties: []string{abi.PropSticky}},
		func(req *abi.Request) func(int) []int {
			owners := sticky.Assign(sticky.FromRequest(req), sticky.Options{Balance: sticky.DefaultBalance, VirtualNodes: sticky.DefaultVirtualNodes})
			starts, byOwner := sticky.Buckets(owners, len(req.Consumers))
			return func(self int) []int {
				if self < 0 {
					return nil
				}
				return byOwner[starts[self]:starts[self+1]]
			}
		}}
}

func run(t *testing.T, p harness.Allocator, opts harness.Options) *harness.Report {
	t.Helper()
	rep, err := harness.Run(context.Background(), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func text(rep *harness.Report) string {
	var b bytes.Buffer
	rep.WriteText(&b)
	return b.String()
}

func requirePass(t *testing.T, rep *harness.Report) {
	t.Helper()
	if !rep.Passed() {
		t.Fatalf("%s fails:\n%s", rep.Plugin.Name, text(rep))
	}
}

// requireFailure checks that exactly check failed, with reason and a scenario of at most
// queues x consumers.
func requireFailure(t *testing.T, rep *harness.Report, check, reason string, queues, consumers int) *harness.Failure {
	t.Helper()
	if len(rep.Failures) != 1 || rep.Failures[0].Check != check {
		t.Fatalf("want exactly a %s failure:\n%s", check, text(rep))
	}
	f := rep.Failures[0]
	if !strings.Contains(f.Reason, reason) {
		t.Fatalf("%s failure reason %q lacks %q", check, f.Reason, reason)
	}
	if rep.Check(check).Status != harness.Fail {
		t.Fatalf("check %s has status %s", check, rep.Check(check).Status)
	}
	if len(f.Scenario.MQAll) > queues || len(f.Scenario.CIDAll) > consumers {
		t.Fatalf("smallest %s scenario has %s, want at most %d queues and %d consumers:\n%s", check, f.Scenario.Size(), queues, consumers, text(rep))
	}
	return f
}

func TestGenerate(t *testing.T) {
	var maxQ, maxC, moreConsumers, outsiders, attrs, prev int
	odd := map[string]bool{}
	for i := range 300 {
		s := harness.Generate(7, i)
		if again := harness.Generate(7, i); !equalJSON(t, s, again) {
			t.Fatalf("scenario %d differs between two generations", i)
		}
		q, c := len(s.MQAll), len(s.CIDAll)
		if q < 1 || q > harness.DefaultMaxQueues || c < 1 || c > harness.DefaultMaxConsumers {
			t.Fatalf("scenario %d: %s out of range", i, s.Size())
		}
		maxQ, maxC = max(maxQ, q), max(maxC, c)
		if c > q {
			moreConsumers++
		}
		if !slices.IsSortedFunc(s.MQAll, abi.CompareQueues) || !slices.IsSorted(s.CIDAll) {
			t.Fatalf("scenario %d is not in canonical order", i)
		}
		if len(slices.Compact(slices.Clone(s.CIDAll))) != c {
			t.Fatalf("scenario %d repeats a consumer id", i)
		}
		if s.Outsider != "" {
			outsiders++
			if slices.Contains(s.CIDAll, s.Outsider) {
				t.Fatalf("scenario %d: outsider %q is in cidAll", i, s.Outsider)
			}
		}
		if s.QueueAttrs != nil {
			attrs++
		}
		if s.PrevOwners != nil {
			prev++
		}
		topics, brokers := map[string]bool{}, map[string]bool{}
		for _, mq := range s.MQAll {
			topics[mq.Topic], brokers[mq.BrokerName] = true, true
		}
		if len(topics) > 1 && len(brokers) > 1 {
			odd["several topics and brokers"] = true
		}
		for _, id := range s.CIDAll {
			for _, ch := range []string{" ", "@", "#", `"`, "'"} {
				if strings.Contains(id, ch) {
					odd[ch] = true
				}
			}
			if !utf8.ValidString(id) {
				t.Fatalf("invalid UTF-8 id %q", id)
			}
			for _, r := range id {
				if r >= utf8.RuneSelf {
					odd["unicode"] = true
				}
			}
		}
	}
	if maxQ != harness.DefaultMaxQueues || maxC != harness.DefaultMaxConsumers {
		t.Errorf("largest group %d queues, %d consumers", maxQ, maxC)
	}
	if moreConsumers < 30 || outsiders < 100 || attrs < 50 || prev < 50 {
		t.Errorf("%d with more consumers than queues, %d outsiders, %d with attributes, %d with previous owners", moreConsumers, outsiders, attrs, prev)
	}
	for _, want := range []string{" ", "@", "#", `"`, "'", "unicode", "several topics and brokers"} {
		if !odd[want] {
			t.Errorf("no generated consumer id with %q", want)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(x, y)
}

// TestScenarioRequest: a scenario's JSON gives back the request the harness sends, and the
// request is a copy.
func TestScenarioRequest(t *testing.T) {
	s := harness.Generate(3, 5)
	s.Outsider = "x y"
	line, _ := json.Marshal(s)
	var back harness.Scenario
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	r := back.Request()
	if !slices.Equal(r.Targets, append(slices.Clone(s.CIDAll), "x y")) || !slices.Equal(r.Queues, s.MQAll) {
		t.Fatalf("request %+v from %s", r, line)
	}
	r.Queues[0].Topic = "changed"
	if s.MQAll[0].Topic == "changed" || back.MQAll[0].Topic == "changed" {
		t.Fatal("the request shares the scenario's queues")
	}
}

func TestNativePasses(t *testing.T) {
	for _, p := range []*native{nativeAveragely(), nativeCircle(), nativeSticky()} {
		t.Run(p.info.Name, func(t *testing.T) {
			rep := run(t, p, harness.Options{Seed: 11, Scenarios: 30})
			requirePass(t, rep)
			for _, c := range rep.Checks {
				if c.Status == harness.Fail || (c.Name != harness.CheckReference && c.Name != harness.CheckVectors && c.Status == harness.Skip) {
					t.Errorf("check %s: %s (%s)", c.Name, c.Status, c.Detail)
				}
			}
			if rep.Cost.Calls == 0 || rep.Cost.P50 <= 0 || rep.Cost.Max < rep.Cost.P99 || rep.Cost.P99 < rep.Cost.P50 || rep.Cost.MemorySource != "go-heap" {
				t.Errorf("cost %+v", rep.Cost)
			}
		})
	}
}

func TestNativeVectors(t *testing.T) {
	requirePass(t, run(t, nativeAveragely(), harness.Options{Scenarios: 3, Vectors: vectorsPath}))
	if got := run(t, nativeAveragely(), harness.Options{Scenarios: 3, Vectors: vectorsPath}).Check(harness.CheckVectors); got.Status != harness.Pass || !strings.Contains(got.Detail, "AVG vectors match") {
		t.Fatalf("vectors: %+v", got)
	}
	// circle's answers are not AVG's.
	rep := run(t, nativeCircle(), harness.Options{Scenarios: 3, Vectors: vectorsPath, Strategy: harness.StrategyAvg})
	f := requireFailure(t, rep, harness.CheckVectors, "Java returned", 1<<20, 1<<20)
	if !strings.Contains(f.FirstSeen, "line ") || f.Occurrences < 10 {
		t.Fatalf("vector failure %+v", f)
	}
	// A plugin whose name tells no strategy needs one.
	if _, err := harness.Run(context.Background(), nativeSticky(), harness.Options{Scenarios: 1, Vectors: vectorsPath}); err == nil || !strings.Contains(err.Error(), "strategy") {
		t.Fatalf("err = %v", err)
	}
}

func TestNativeReference(t *testing.T) {
	requirePass(t, run(t, nativeAveragely(), harness.Options{Scenarios: 10, Reference: nativeAveragely()}))
	rep := run(t, nativeAveragely(), harness.Options{Scenarios: 10, Reference: nativeCircle()})
	f := requireFailure(t, rep, harness.CheckReference, "different answer from the reference", 3, 2)
	// The smallest difference: 2 queues, 2 consumers ([0 1] against [0 2]... needs 3 queues).
	if len(f.Scenario.MQAll) != 3 || len(f.Scenario.CIDAll) != 2 || !strings.Contains(f.Reason, "plugin [0 1], reference [0 2]") {
		t.Fatalf("reference failure %+v", f)
	}
}

// TestNativeBroken: each broken strategy fails its own check, shrunk to the smallest group.
func TestNativeBroken(t *testing.T) {
	skip := perTarget(abi.Info{Name: "skip"}, func(req *abi.Request, self int) []int {
		n, c := len(req.Queues), len(req.Consumers)
		var out []int
		for i := self * (n / c); self >= 0 && i < (self+1)*(n/c); i++ {
			out = append(out, i)
		}
		return out
	})
	f := requireFailure(t, run(t, skip, harness.Options{Seed: 2, Scenarios: 10}), harness.CheckCoverage, `does not declare "partial"`, 1, 2)
	if !f.Shrunk || f.Scenario.Outsider != "" || f.Scenario.CIDAll[0] != "c0" || f.Scenario.MQAll[0].Topic != "T0" || f.Scenario.Group != "g" {
		t.Fatalf("not shrunk to short names: %+v", f.Scenario)
	}

	// The same strategy declaring "partial" passes, with coverage as a figure.
	skip.info.Properties = []string{abi.PropPartial}
	rep := run(t, skip, harness.Options{Seed: 2, Scenarios: 10})
	requirePass(t, rep)
	if c := rep.Check(harness.CheckCoverage); c.Status != harness.Figure || !strings.Contains(c.Detail, "% of queues") {
		t.Fatalf("coverage %+v", c)
	}

	lopsided := perTarget(abi.Info{Name: "lopsided", Properties: []string{abi.PropBalanced}}, func(req *abi.Request, self int) []int {
		if self == 0 {
			return averagely.Allocate(nil, len(req.Queues), 1, 0)
		}
		return nil
	})
	requireFailure(t, run(t, lopsided, harness.Options{Scenarios: 10}), harness.CheckBalance, "max-min is 2", 2, 2)

	greedyOutsider := perTarget(abi.Info{Name: "outsider", Properties: []string{abi.PropPartial}}, func(req *abi.Request, self int) []int {
		if self < 0 {
			return []int{0}
		}
		return nil
	})
	requireFailure(t, run(t, greedyOutsider, harness.Options{Scenarios: 10}), harness.CheckOutsider, "not in cidAll", 1, 1)

	// averagely is not sticky: promising it fails on the first join or leave.
	promising := nativeAveragely()
	promising.info.Properties = append(promising.info.Properties, abi.PropSticky)
	f = requireFailure(t, run(t, promising, harness.Options{Scenarios: 10}), harness.CheckStability, "between consumers present before and after", 3, 3)
	if f.Event == nil || (f.Event.Kind != harness.Join && f.Event.Kind != harness.Leave) {
		t.Fatalf("stability failure without its event: %+v", f)
	}
	if f.Scenario.Group != "g" || !strings.HasPrefix(f.Event.Consumer, "c") || !strings.HasPrefix(f.Scenario.CIDAll[0], "c") {
		t.Fatalf("stability failure not shrunk to short names: %+v %+v", f.Scenario, f.Event)
	}
}

type erring struct{ *native }

func (e erring) Allocate(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	if len(req.Queues) > 5 {
		return nil, errors.New("too many queues")
	}
	return e.native.Allocate(ctx, req)
}

// counting answers differently on every other call of one instance.
type counting struct {
	mu    sync.Mutex
	calls int
}

func (c *counting) Info() abi.Info {
	return abi.Info{Name: "counting", Properties: []string{abi.PropBalanced}}
}

func (c *counting) Allocate(_ context.Context, req *abi.Request) (*abi.Response, error) {
	c.mu.Lock()
	c.calls++
	shift := c.calls % 2
	c.mu.Unlock()
	resp := &abi.Response{}
	for t := range req.NumTargets() {
		self := slices.Index(req.Consumers, req.Target(t))
		if self >= 0 {
			self = (self + shift) % len(req.Consumers)
		}
		resp.Results = append(resp.Results, abi.Result{Indices: circle.Allocate(nil, len(req.Queues), len(req.Consumers), self)})
	}
	return resp, nil
}

func TestNativeErrorsAndDeterminism(t *testing.T) {
	rep := run(t, erring{nativeAveragely()}, harness.Options{Scenarios: 10})
	requireFailure(t, rep, harness.CheckErrors, "too many queues", 6, 1)

	rep = run(t, &counting{}, harness.Options{Scenarios: 10})
	requireFailure(t, rep, harness.CheckDeterminism, "answered differently", 1, 2)
}

// slow runs out of time on groups of more than 5 queues, as a plugin stopped at its deadline.
type slow struct{ *native }

func (s slow) Allocate(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	if len(req.Queues) > 5 {
		return nil, fmt.Errorf("plugin stopped: %w", context.DeadlineExceeded)
	}
	return s.native.Allocate(ctx, req)
}

// TestQuickKeepsTheCallsError: a failure of calls that failed carries the plugin's error, so that
// the registry tells a version that ran out of time (and tries it again) from one whose calls
// fail on their own.
func TestQuickKeepsTheCallsError(t *testing.T) {
	err := harness.Quick(context.Background(), slow{nativeAveragely()}, nil)
	var f *harness.Failure
	if !errors.As(err, &f) || f.Check != harness.CheckErrors || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Quick(slow) = %v, want a failed-calls failure matching context.DeadlineExceeded", err)
	}
	err = harness.Quick(context.Background(), erring{nativeAveragely()}, nil)
	if !errors.As(err, &f) || f.Check != harness.CheckErrors || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Quick(erring) = %v, want a failed-calls failure that is not a deadline's", err)
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := harness.Run(ctx, nativeAveragely(), harness.Options{Scenarios: 5}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if err := harness.Quick(ctx, nativeAveragely(), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Quick = %v, want context.Canceled", err)
	}
}

func TestNativeQuick(t *testing.T) {
	for _, p := range []*native{nativeAveragely(), nativeCircle(), nativeSticky()} {
		if err := harness.Quick(context.Background(), p, nil); err != nil {
			t.Errorf("%s: %v", p.info.Name, err)
		}
	}
	err := harness.Quick(context.Background(), &counting{}, nil)
	var f *harness.Failure
	if !errors.As(err, &f) || f.Check != harness.CheckDeterminism {
		t.Fatalf("Quick(counting) = %v", err)
	}
}

// TestMovementFigure: on fixed-size groups, averagely moves far more than the minimum, sticky
// moves the minimum on a leave and nothing between stayers.
func TestMovementFigure(t *testing.T) {
	opts := harness.Options{Seed: 1, Scenarios: 6, StabilityQueues: 256, StabilityConsumers: 16}
	avg := run(t, nativeAveragely(), opts).Stability
	st := run(t, nativeSticky(), opts).Stability
	for i, ev := range []string{harness.Join, harness.Leave} {
		if avg[i].Event != ev || st[i].Event != ev || avg[i].Rounds != 6 || st[i].Rounds != 6 || avg[i].Queues != 6*256 {
			t.Fatalf("figures %+v %+v", avg[i], st[i])
		}
		if avg[i].Ratio() < 2 || avg[i].BetweenStayers == 0 {
			t.Errorf("averagely %s: %+v", ev, avg[i])
		}
		if st[i].BetweenStayers != 0 || st[i].Moved > st[i].Minimum {
			t.Errorf("sticky %s: %+v", ev, st[i])
		}
	}
	if st[1].Moved != st[1].Minimum {
		t.Errorf("sticky leave moved %d, minimum %d", st[1].Moved, st[1].Minimum)
	}
}

// TestWasmBuiltins: built-in plugins pass through the host, with their vectors, and Quick passes
// them well under a second (ten under the race detector: raceSlowdown). (Compiling a guest
// under the race detector takes seconds, so this package loads only a few modules;
// cmd/allocd's tests run `allocd check` on every built-in and every broken test plugin.)
func TestWasmBuiltins(t *testing.T) {
	for _, name := range []string{"averagely", "sticky"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			p := plugin(t, "plugins/"+name+"/wasm")
			t.Logf("build and load took %v", time.Since(start))
			start = time.Now()
			if err := harness.Quick(context.Background(), p, nil); err != nil {
				t.Fatalf("Quick: %v", err)
			}
			if d := time.Since(start); d > raceSlowdown*time.Second {
				t.Errorf("Quick took %v", d)
			} else {
				t.Logf("Quick took %v", d)
			}
			opts := harness.Options{Seed: 5, Scenarios: 12}
			if name != "sticky" {
				opts.Vectors = vectorsPath
			}
			start = time.Now()
			rep := run(t, p, opts)
			t.Logf("Run took %v", time.Since(start))
			requirePass(t, rep)
			if name != "sticky" && rep.Check(harness.CheckVectors).Status != harness.Pass {
				t.Fatalf("vectors: %+v", rep.Check(harness.CheckVectors))
			}
		})
	}
}

// TestWasmBroken: broken test plugins fail their check with their reason and a small scenario,
// in Run and in Quick, through the host: a double assignment arrives as the host's refusal of the
// answer, and the call counter of the nondeterministic plugin lives in each pooled instance.
func TestWasmBroken(t *testing.T) {
	for _, c := range []struct {
		name, check, reason string
		queues, consumers   int
	}{
		{"doubleassign", harness.CheckValid, "given to both", 2, 2},
		{"nondeterministic", harness.CheckDeterminism, "answered differently", 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plugin(t, "harness/testdata/plugins/"+c.name)
			rep := run(t, p, harness.Options{Seed: 3, Scenarios: 10})
			f := requireFailure(t, rep, c.check, c.reason, c.queues, c.consumers)
			if !f.Shrunk || f.Occurrences < 1 {
				t.Fatalf("failure %+v", f)
			}
			err := harness.Quick(context.Background(), p, nil)
			var qf *harness.Failure
			if !errors.As(err, &qf) || qf.Check != c.check {
				t.Fatalf("Quick = %v, want a %s failure", err, c.check)
			}
		})
	}
}

func TestWasmStickyConfig(t *testing.T) {
	p := plugin(t, "plugins/sticky/wasm")
	err := harness.Quick(context.Background(), p, map[string]string{"balance": "0.5"})
	if err == nil || !strings.Contains(err.Error(), `"balance"`) {
		t.Fatalf("Quick with balance 0.5 = %v", err)
	}
	rep := run(t, p, harness.Options{Scenarios: 6, Config: map[string]string{"balance": "1"}})
	requirePass(t, rep)
}

func TestReportJSON(t *testing.T) {
	rep := run(t, nativeAveragely(), harness.Options{Scenarios: 4, Reference: nativeCircle()})
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Plugin   abi.Info              `json:"plugin"`
		Checks   []harness.CheckResult `json:"checks"`
		Failures []harness.Failure     `json:"failures"`
		Cost     map[string]any        `json:"cost"`
		Stab     []harness.Movement    `json:"stability"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Plugin.Name != "averagely" || len(back.Checks) != 10 || len(back.Failures) != 1 || back.Failures[0].Scenario == nil || len(back.Stab) != 2 {
		t.Fatalf("report JSON: %s", b.String())
	}
	if _, ok := back.Cost["p99Ns"]; !ok {
		t.Fatalf("cost %v", back.Cost)
	}
	out := text(rep)
	for _, want := range []string{"\nerrors       ok: ", "\nvalid        ok: ", " answers pass abi.Validate", "\nreference    FAIL: ", " whole-group answers differ from ", "MOVEMENT", "latency", `{"group":"g"`} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}
