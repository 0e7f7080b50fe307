package lock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/lock"
)

// A side-by-side simulation, on a simulated clock, of one queue shared by 100 message groups
// with one slow group: how fast do the other 99 go with RocketMQ 5's FIFO pop (per-queue
// blocking, spec part C) and with allocd's per-message-group locks (this package's Table)?
//
// The queue holds an endless backlog with the groups interleaved: message k belongs to group
// k mod 100. A message of a fast group takes 10 ms to process, one of the slow group (group 0)
// 1 s. Pops, locks and acks take no time, which favours neither side.

const (
	holGroups = 100
	holFast   = 10 * time.Millisecond
	holSlow   = time.Second
	holRun    = 120 * time.Second
	holBatch  = 32 // RocketMQ's pop batch
)

func holCost(k int, slow bool) time.Duration {
	if slow && k%holGroups == 0 {
		return holSlow
	}
	return holFast
}

// holResult counts the messages finished within holRun: of the fast groups and of the slow one.
type holResult struct{ fast, slow int }

func (r *holResult) done(k int) {
	if k%holGroups == 0 {
		r.slow++
	} else {
		r.fast++
	}
}

// rocketMQSequential is RocketMQ 5 FIFO pop with the Java client's default: a pop takes up to 32
// messages from the queue's committed offset, the queue is blocked until all of them are acked,
// and the consumer processes them one at a time, in order. Only one batch of a queue is ever in
// flight, so the number of consumers does not matter.
func rocketMQSequential(slow bool) holResult {
	var r holResult
	var now time.Duration
	for k := 0; ; k++ {
		now += holCost(k, slow)
		if now > holRun {
			return r
		}
		r.done(k)
	}
}

// rocketMQAccelerated is the same with enableFifoConsumeAccelerator: the consumer splits a
// batch by message group and runs the groups in parallel on its threads (each group's messages
// in order, a group on the first thread free); the queue still unblocks only when the whole
// batch is acked.
func rocketMQAccelerated(slow bool, threads int) holResult {
	var r holResult
	var start time.Duration
	for k0 := 0; start < holRun; k0 += holBatch {
		var order []int
		byGroup := map[int][]int{}
		for k := k0; k < k0+holBatch; k++ {
			g := k % holGroups
			if byGroup[g] == nil {
				order = append(order, g)
			}
			byGroup[g] = append(byGroup[g], k)
		}
		free := make([]time.Duration, threads)
		for i := range free {
			free[i] = start
		}
		end := start
		for _, g := range order {
			th := 0
			for i := range free {
				if free[i] < free[th] {
					th = i
				}
			}
			for _, k := range byGroup[g] {
				free[th] += holCost(k, slow)
				if free[th] <= holRun {
					r.done(k)
				}
			}
			end = max(end, free[th])
		}
		start = end
	}
	return r
}

// simDirectory is one message-based orderly group whose members are the consumers.
type simDirectory struct{ members []string }

func (d simDirectory) Group(string) (lock.GroupConfig, bool) {
	return lock.GroupConfig{Kind: lock.KindMessageGroup}, true
}
func (d simDirectory) Members(string) []string         { return d.members }
func (d simDirectory) Owner(string, lock.Queue) string { return "" }

// allocdLocks is message-based delivery with per-message-group locks: every consumer reads the
// queue; an idle consumer takes the lock of the free message group with the oldest pending
// message, processes that message, and releases the lock (Done). Different groups never wait
// for each other; the slow group occupies one consumer at a time.
func allocdLocks(t *testing.T, consumers int, slow bool) holResult {
	members := make([]string, consumers)
	for i := range members {
		members[i] = fmt.Sprintf("c%d", i)
	}
	table, err := lock.New(lock.Config{Directory: simDirectory{members}})
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var r holResult
	next := make([]int, holGroups) // the offset of each group's next message
	for g := range next {
		next[g] = g
	}
	busy := make([]bool, holGroups)
	type work struct {
		k     int
		until time.Duration
		token uint64
	}
	held := make([]*work, consumers)
	var now time.Duration
	for {
		// Idle consumers take the free group with the oldest pending message.
		for c := range held {
			if held[c] != nil {
				continue
			}
			best := -1
			for g := range next {
				if !busy[g] && (best < 0 || next[g] < next[best]) {
					best = g
				}
			}
			if best < 0 {
				continue
			}
			grant, refusal, err := table.LockMessageGroup(epoch.Add(now), "g", members[c], lock.MessageGroup{Topic: "T", Name: fmt.Sprint(best)}, 0)
			if err != nil || refusal != nil {
				t.Fatalf("%s refused group %d: %v %+v", members[c], best, err, refusal)
			}
			busy[best] = true
			held[c] = &work{k: next[best], until: now + holCost(next[best], slow), token: grant.Token}
		}
		// The next consumer to finish.
		c := 0
		for i := range held {
			if held[i].until < held[c].until {
				c = i
			}
		}
		w := held[c]
		if now = w.until; now > holRun {
			return r
		}
		r.done(w.k)
		g := w.k % holGroups
		if err := table.ReleaseMessageGroup(epoch.Add(now), "g", members[c], lock.MessageGroup{Topic: "T", Name: fmt.Sprint(g)}, w.token, lock.Done); err != nil {
			t.Fatal(err)
		}
		busy[g], next[g], held[c] = false, next[g]+holGroups, nil
	}
}

// TestHeadOfLineBlocking prints the figures of BENCHMARKS.md's ordered-locks section (run with
// -v) and checks that per-group locks keep the fast groups going. Parallelism is the consumer
// threads working on the queue: RocketMQ's accelerator threads in one consumer, or allocd
// consumers (one message at a time each).
func TestHeadOfLineBlocking(t *testing.T) {
	perSec := func(n int) float64 { return float64(n) / holRun.Seconds() }
	var b strings.Builder
	fmt.Fprintf(&b, "%-42s %11s %12s %12s %12s\n", "scheme", "parallelism", "fast msgs/s", "(no slow)", "slow msgs/s")
	row := func(name, par string, run func(slow bool) holResult) holResult {
		with, without := run(true), run(false)
		fmt.Fprintf(&b, "%-42s %11s %12.1f %12.1f %12.2f\n", name, par, perSec(with.fast), perSec(without.fast), perSec(with.slow))
		return with
	}
	seq := row("RocketMQ FIFO pop (per-queue blocking)", "1", rocketMQSequential)
	acc := map[int]holResult{}
	ours := map[int]holResult{}
	for _, n := range []int{4, 8} {
		acc[n] = row("RocketMQ FIFO pop + FifoConsumeAccelerator", fmt.Sprint(n), func(slow bool) holResult { return rocketMQAccelerated(slow, n) })
	}
	for _, n := range []int{1, 4, 8} {
		ours[n] = row("allocd message-group locks", fmt.Sprint(n), func(slow bool) holResult { return allocdLocks(t, n, slow) })
	}
	t.Logf("one queue, %d message groups interleaved, %v per message, %v for the slow group's, %v simulated:\n%s",
		holGroups, holFast, holSlow, holRun, b.String())

	// Per-group locks: one consumer works through the slow group while the others keep
	// serving the fast ones; per-queue blocking stalls every group behind it.
	for _, n := range []int{4, 8} {
		if got, want := perSec(ours[n].fast), 2*perSec(acc[n].fast); got < want {
			t.Errorf("parallelism %d: message-group locks give %.1f fast msgs/s, want at least twice the accelerated pop's %.1f", n, got, perSec(acc[n].fast))
		}
	}
	if perSec(ours[1].fast) < perSec(seq.fast) {
		t.Errorf("one consumer with message-group locks is slower than per-queue blocking")
	}
}
