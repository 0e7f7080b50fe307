package coordinator_test

// Large-group benchmarks (issue 17, item 3): one group of 10,000 consumers over 100,000 queues
// (100 brokers x 1,000), rebalanced through the coordinator with the built-in wasm plugins, a
// bbolt store on disk (fsync on) and every member's answer encoded as the server encodes it.
// They take tens of seconds to set up and are meant to be run alone:
//
//	go test -run '^$' -bench LargeGroup -benchtime 10x -count 6 ./coordinator/

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/builtin"
	"github.com/allocd/allocd/store"
)

// wasmAllocator serves built-in plugins through the wasm host, as the daemon's registry does.
type wasmAllocator struct{ plugins map[string]*host.Plugin }

func newWasmAllocator(tb testing.TB, names ...string) *wasmAllocator {
	tb.Helper()
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{Timeout: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rt.Close(ctx) })
	a := &wasmAllocator{plugins: map[string]*host.Plugin{}}
	for _, name := range names {
		wasm, ok := builtin.Bytes(name)
		if !ok {
			tb.Skipf("built-in plugin %s is not embedded (run make embed)", name)
		}
		p, err := rt.Load(ctx, name, wasm)
		if err != nil {
			tb.Fatal(err)
		}
		a.plugins[name] = p
	}
	return a
}

func (a *wasmAllocator) Allocate(ctx context.Context, plugin string, req *abi.Request) (*abi.Response, string, error) {
	p := a.plugins[plugin]
	if p == nil {
		return nil, "", fmt.Errorf("plugin %q: not loaded", plugin)
	}
	resp, err := p.Allocate(ctx, req)
	return resp, p.Hash(), err
}

// processCPU is the CPU time (user+system) of this process so far: every goroutine, the
// garbage collector's included.
func processCPU() time.Duration {
	cpu, _, _ := processUsage()
	return cpu
}

// processUsage is the process's CPU time, the system part of it, and its minor page faults so
// far.
func processUsage() (cpu, sys time.Duration, faults int64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Stime.Nano()), ru.Minflt
}

// largeGroup is a coordinator holding one group of members consumers of topic T (brokers x
// perBroker queues), with its first generation published.
type largeGroup struct {
	c     *coordinator.Coordinator
	clock *fakeClock
	st    store.Store
	dir   string
	cids  []string
}

const largeTopic = "T"

func newLargeGroup(b *testing.B, alloc coordinator.Allocator, strategy string, members, brokers, perBroker int) *largeGroup {
	b.Helper()
	lg := &largeGroup{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, dir: b.TempDir()}
	st, err := store.Open(lg.dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	lg.st = st
	lg.c, err = coordinator.New(coordinator.Options{Store: st, Allocator: alloc, Clock: lg.clock, SessionTimeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	bs := make([]coordinator.Broker, brokers)
	for i := range bs {
		bs[i] = coordinator.Broker{Name: fmt.Sprintf("broker-%03d", i), ReadQueues: perBroker, WriteQueues: perBroker}
	}
	if _, _, err := lg.c.PutTopic(largeTopic, bs); err != nil {
		b.Fatal(err)
	}
	if _, _, err := lg.c.PutGroup("g", coordinator.Binding{Strategy: strategy}); err != nil {
		b.Fatal(err)
	}
	for i := range members {
		cid := fmt.Sprintf("10.%d.%d.%d@%d", i/65536, i/256%256, i%256, 1000+i)
		lg.cids = append(lg.cids, cid)
		lg.heartbeat(b, cid)
	}
	lg.settle(b)
	return lg
}

// heartbeat sends cid's heartbeat, reporting the generation it was last told as applied (the Go
// client's default, confirming revocations), and returns the answer.
func (lg *largeGroup) heartbeat(b *testing.B, cid string, applied ...int64) coordinator.Assignment {
	hb := coordinator.Heartbeat{CID: cid, Topics: []string{largeTopic}, Confirms: true}
	if len(applied) > 0 && applied[0] > 0 {
		hb.Generations = map[string]int64{largeTopic: applied[0]}
	}
	a, err := lg.c.Heartbeat("g", hb)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// settle ticks past the debounce until nothing is pending.
func (lg *largeGroup) settle(b *testing.B) {
	for range 10 {
		lg.clock.Advance(time.Second)
		lg.c.Tick(context.Background())
		st, err := lg.c.Group("g")
		if err != nil {
			b.Fatal(err)
		}
		if ts := st.Topics[largeTopic]; ts.Generation > 0 && !ts.Pending {
			return
		}
	}
	b.Fatal("the group did not settle")
}

func (lg *largeGroup) generation(b *testing.B) int64 {
	a, _, err := lg.c.Poll("g", lg.cids[0], nil)
	if err != nil {
		b.Fatal(err)
	}
	return a.Generations[largeTopic]
}

// encodedSize is the size of v as the server writes it.
func encodedSize(v any) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return buf.Len()
}

// BenchmarkLargeGroup: one op is one rebalance of a 10,000-consumer group over 100,000 queues:
// a member joins (even ops) or leaves (odd ops), sorting in the middle of the group so that
// averagely moves half the queues; the coordinator calls the wasm plugin, diffs the answer
// against the previous generation, stores it with its history entry (bbolt, fsync on), and then
// every member's long-poll is answered (Poll and the server's JSON encoding); the members'
// confirming heartbeats follow and the handoff generation they release is published too.
//
// Metrics: cpu-ms/rebalance is the process's CPU time for the rebalance Tick alone (plugin call,
// diff, handoff bookkeeping, persistence) and alloc-MB/rebalance the memory it allocates (what
// drives the garbage collector's share of that CPU); answers-cpu-ms the 10,000 long-poll answers;
// handoff-cpu-ms the confirming heartbeats and the handoff generation's Tick; record-bytes the
// stored generation record; history-bytes the rebalance's history record and
// handoff-history-bytes the handoff generation's; answer-bytes one 10-queue member's heartbeat
// answer; sys-ms/rebalance and faults/rebalance the system CPU time and minor page faults in
// cpu-ms/rebalance. A CPU profile labels the two Ticks phase=rebalance and phase=handoff, and
// strategy (pprof -tagfocus).
//
// Before its loop the benchmark rebalances until the plugin instance's memory has not grown for
// settleRebalances in a row (at most maxSettleRebalances), so that the loop times a running
// instance, as a daemon's are: a new averagely instance's memory grows by 512 KiB every three or
// four rebalances of this group until about the 23rd, and a growth past the memory's capacity
// copies it into fresh pages (RATIONALE.md).
// warmup-rebalances is how many that took and warmup-cpu-ms/rebalance their rebalance CPU.
func BenchmarkLargeGroup(b *testing.B) {
	const members, brokers, perBroker = 10_000, 100, 1_000
	for _, strategy := range []string{"averagely", "hash", "sticky"} {
		b.Run(strategy, func(b *testing.B) {
			wa := newWasmAllocator(b, strategy)
			lg := newLargeGroup(b, wa, strategy, members, brokers, perBroker)
			benchRebalances(b, lg, strategy, func() int64 { return wa.plugins[strategy].Stats().MemoryBytes })
		})
	}
}

// settleRebalances and maxSettleRebalances bound the rebalances before BenchmarkLargeGroup's
// loop; an odd count takes one more, so that the joiner has left again when the loop starts.
const settleRebalances, maxSettleRebalances = 10, 120

func benchRebalances(b *testing.B, lg *largeGroup, strategy string, memory func() int64) {
	ctx := context.Background()
	joiner := lg.cids[len(lg.cids)/2] + "-joiner"
	var tickCPU, answerCPU, handoffCPU time.Duration
	var answerBytes int
	var lastGen, lastHandoffGen int64
	var ms runtime.MemStats
	var tickAlloc uint64 // bytes allocated by the rebalance Ticks
	var tickSys time.Duration
	var tickFaults int64
	cycle := func(i int) {
		before := lg.generation(b)
		if i%2 == 0 {
			lg.heartbeat(b, joiner)
		} else if _, err := lg.c.Leave("g", joiner); err != nil {
			b.Fatal(err)
		}
		lg.clock.Advance(time.Second)

		runtime.ReadMemStats(&ms)
		allocated := ms.TotalAlloc
		t0, s0, f0 := processUsage()
		pprof.Do(ctx, pprof.Labels("phase", "rebalance", "strategy", strategy), func(ctx context.Context) { lg.c.Tick(ctx) })
		t1, s1, f1 := processUsage()
		tickCPU += t1 - t0
		tickSys += s1 - s0
		tickFaults += f1 - f0
		runtime.ReadMemStats(&ms)
		tickAlloc += ms.TotalAlloc - allocated
		gen := lg.generation(b)
		if gen == before {
			b.Fatalf("op %d: no new generation (still %d)", i, gen)
		}
		lastGen = gen

		// Every member's long-poll wakes and answers its member's assignment.
		answerBytes = 0
		t0 = processCPU()
		for _, cid := range lg.cids {
			a, _, err := lg.c.Poll("g", cid, nil)
			if err != nil {
				b.Fatal(err)
			}
			answerBytes += encodedSize(a)
		}
		answerCPU += processCPU() - t0

		// The members confirm; the handoff generation releases what was held back.
		t0 = processCPU()
		for _, cid := range lg.cids {
			lg.heartbeat(b, cid, gen)
		}
		if i%2 == 0 {
			lg.heartbeat(b, joiner, gen)
		}
		lg.clock.Advance(10 * time.Millisecond)
		pprof.Do(ctx, pprof.Labels("phase", "handoff", "strategy", strategy), func(ctx context.Context) { lg.c.Tick(ctx) })
		handoffCPU += processCPU() - t0
		if next := lg.generation(b); next > gen {
			lastHandoffGen = next
		}
	}
	warm, last, same := 0, int64(-1), 0
	for warm < maxSettleRebalances && same < settleRebalances {
		cycle(warm)
		warm++
		if m := memory(); m != last {
			last, same = m, 0
		} else {
			same++
		}
	}
	if warm%2 != 0 { // the joiner leaves again
		cycle(warm)
		warm++
	}
	warmCPU := tickCPU
	tickCPU, answerCPU, handoffCPU, tickAlloc, tickSys, tickFaults = 0, 0, 0, 0, 0, 0
	runtime.GC()
	b.ResetTimer()
	for i := range b.N {
		cycle(i)
	}
	b.StopTimer()
	// The history records are read once, after the loop: reading each one back (1.3 MB, in
	// parts) left about 6 MB of garbage an iteration that the daemon does not make, and the
	// collections it started fell into the Ticks' CPU.
	historyBytes := historyRecordBytes(b, lg, lastGen)
	handoffHistoryBytes := 0
	if lastHandoffGen > 0 {
		handoffHistoryBytes = historyRecordBytes(b, lg, lastHandoffGen)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tickCPU.Microseconds())/1e3/n, "cpu-ms/rebalance")
	b.ReportMetric(float64(tickSys.Microseconds())/1e3/n, "sys-ms/rebalance")
	b.ReportMetric(float64(tickFaults)/n, "faults/rebalance")
	b.ReportMetric(float64(warm), "warmup-rebalances")
	b.ReportMetric(float64(warmCPU.Microseconds())/1e3/float64(warm), "warmup-cpu-ms/rebalance")
	b.ReportMetric(float64(tickAlloc)/1e6/n, "alloc-MB/rebalance")
	b.ReportMetric(float64(answerCPU.Microseconds())/1e3/n, "answers-cpu-ms")
	b.ReportMetric(float64(handoffCPU.Microseconds())/1e3/n, "handoff-cpu-ms")
	b.ReportMetric(float64(answerBytes)/float64(len(lg.cids)), "answer-bytes")
	b.ReportMetric(float64(recordBytes(b, lg)), "record-bytes")
	b.ReportMetric(float64(historyBytes), "history-bytes")
	b.ReportMetric(float64(handoffHistoryBytes), "handoff-history-bytes")
}

// historyRecordBytes is the size of generation n's stored history record.
func historyRecordBytes(b *testing.B, lg *largeGroup, n int64) int {
	var size int
	err := lg.st.View(func(tx store.Tx) error {
		v, ok, err := store.GetHistory(tx, "g", largeTopic, n)
		if !ok && err == nil {
			err = fmt.Errorf("generation %d has no history record", n)
		}
		size = len(v)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// recordBytes is the size of the group's stored generation record, as the store encodes it.
func recordBytes(b *testing.B, lg *largeGroup) int {
	gens, err := lg.st.ListGenerations()
	if err != nil || len(gens) != 1 {
		b.Fatalf("%d generations stored (%v)", len(gens), err)
	}
	raw, err := json.Marshal(gens[0])
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}
