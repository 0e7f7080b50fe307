package main_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
)

// BenchmarkRollingRestart restarts 20 members of a group over 256 queues one at a time, each
// away for 2 s, with members that heartbeat every second and apply a generation after up to
// 100 ms of work in flight, in eager and cooperative handoff. It reports the queue-seconds
// during which two members held a queue, the longest and mean stretch a queue had no owner, and
// the time from the first restart to the final assignment. Run it with -benchtime=1x.
func BenchmarkRollingRestart(b *testing.B) {
	for _, mode := range []client.HandoffMode{client.HandoffEager, client.HandoffCooperative} {
		b.Run("mode="+string(mode), func(b *testing.B) {
			for range b.N {
				rollingRestart(b, mode, 20, 256)
			}
		})
	}
}

func rollingRestart(b *testing.B, mode client.HandoffMode, members, queues int) {
	const (
		hbEvery = time.Second
		away    = 2 * time.Second
		work    = 100 * time.Millisecond
	)
	d := startLoadDaemon(b, "--session-timeout", "3s", "--debounce", "50ms", "--log-level", "warn")
	c := client.New(d.url)
	all := handoffGroup(b, c, mode, queues)
	s := newSim(b, d.url, "g", "T", hbEvery)
	live := make([]*simMember, members)
	for i := range live {
		live[i] = s.join(fmt.Sprintf("m%02d", i), work, uint64(i+1))
	}
	waitStable(b, c, queues, live...)
	start := time.Now()
	for i := range live {
		live[i].leave()
		time.Sleep(away) // the member's restart: part of the scenario, not a wait for a timer
		live[i] = s.join(live[i].cid, work, uint64(100+i))
		waitStable(b, c, queues, live...)
	}
	final := time.Since(start)
	for _, m := range live {
		m.stop()
	}
	hist := readHistory(b, c)
	r := replay(s.log(), removals(hist), all, start)
	if mode == client.HandoffCooperative && r.overlaps > 0 {
		for _, e := range hist {
			b.Logf("generation %d at %s: %s; %d moves, %d held back", e.Generation, e.At.Format("15:04:05.000"), coordinator.DescribeTrigger(e.Trigger), len(e.Moves), len(e.Pending))
		}
		b.Fatalf("cooperative: %d instants with a queue held twice, such as %v; removals %v", r.overlaps, r.examples, removals(hist))
	}
	mean := time.Duration(0)
	if r.noOwnerN > 0 {
		mean = r.noOwnerSum / time.Duration(r.noOwnerN)
	}
	b.ReportMetric(r.doubleQS, "double-owned-queue-s")
	b.ReportMetric(r.maxNoOwner.Seconds(), "max-ownerless-s")
	b.ReportMetric(mean.Seconds(), "mean-ownerless-s")
	b.ReportMetric(final.Seconds(), "final-assignment-s")
	b.ReportMetric(0, "ns/op")
}
