package autoscale_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
)

// benchTopic is a busy topic: two brokers, two clustering groups of 32 members and one
// broadcasting group of 8, all confirmed, with offsets known for every queue.
func benchTopic(b *testing.B) (*autoscale.Topic, time.Time, map[string][]string) {
	b.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	topic, err := autoscale.New("t", enabled(), []autoscale.Broker{{Name: "broker-a", Read: 32, Write: 32}, {Name: "broker-b", Read: 32, Write: 32}})
	if err != nil {
		b.Fatal(err)
	}
	groups := map[string][]string{}
	for _, g := range []struct {
		name  string
		model autoscale.Model
		n     int
	}{{"g1", autoscale.Clustering, 32}, {"g2", autoscale.Clustering, 32}, {"g3", autoscale.Broadcasting, 8}} {
		for i := range g.n {
			groups[g.name] = append(groups[g.name], fmt.Sprintf("%s-member-%d", g.name, i))
		}
		if _, err := topic.SetGroup(now, autoscale.Group{Name: g.name, Model: g.model, Members: groups[g.name]}); err != nil {
			b.Fatal(err)
		}
		for _, m := range groups[g.name] {
			topic.Confirm(now, g.name, m, topic.Layout())
		}
	}
	var offsets []autoscale.Offset
	for _, br := range []string{"broker-a", "broker-b"} {
		for q := range 32 {
			offsets = append(offsets, autoscale.Offset{Broker: br, Queue: q, Committed: 100, Max: 100, LastWrite: now})
		}
	}
	topic.ReportOffsets(now, "g1", offsets)
	topic.ReportOffsets(now, "g2", offsets)
	return topic, now, groups
}

// BenchmarkHeartbeat is the commonest input: a member's heartbeat, which the daemon turns
// into an unchanged membership snapshot of its group, a confirmation and an offset report of
// the queues it owns (one per broker here).
func BenchmarkHeartbeat(b *testing.B) {
	topic, now, groups := benchTopic(b)
	members := groups["g1"]
	owned := []autoscale.Offset{
		{Broker: "broker-a", Queue: 3, Committed: 100, Max: 100},
		{Broker: "broker-b", Queue: 3, Committed: 100, Max: 100},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		topic.SetGroup(now, autoscale.Group{Name: "g1", Members: members})
		topic.Confirm(now, "g1", members[i%len(members)], topic.Layout())
		topic.ReportOffsets(now, "g1", owned)
	}
}

// BenchmarkTick is a timer firing with nothing due.
func BenchmarkTick(b *testing.B) {
	topic, now, _ := benchTopic(b)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		topic.Tick(now)
	}
}

// BenchmarkDrainCheck is a failed drain check of a read drop from 64 to 32 queues per broker
// with two groups that count: the most expensive tick there is.
func BenchmarkDrainCheck(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := enabled()
	p.ShrinkStableFor = 0
	topic, err := autoscale.New("t", p, []autoscale.Broker{{Name: "broker-a", Read: 64, Write: 64}, {Name: "broker-b", Read: 64, Write: 64}})
	if err != nil {
		b.Fatal(err)
	}
	var offsets []autoscale.Offset
	for _, br := range []string{"broker-a", "broker-b"} {
		for q := range 64 {
			offsets = append(offsets, autoscale.Offset{Broker: br, Queue: q, Committed: 90, Max: 100})
		}
	}
	topic.ReportOffsets(now, "g1", offsets)
	topic.ReportOffsets(now, "g2", offsets)
	members := make([]string, 32)
	for i := range members {
		members[i] = fmt.Sprintf("m%d", i)
	}
	topic.SetGroup(now, autoscale.Group{Name: "g1", Members: members})
	topic.SetGroup(now, autoscale.Group{Name: "g2", Members: members[:8]})
	b.ReportAllocs()
	for b.Loop() {
		due, ok := topic.NextDeadline()
		if !ok {
			b.Fatal("nothing pending")
		}
		if out := topic.Tick(due); len(out.Events) == 0 {
			b.Fatal("the tick did nothing")
		}
	}
}

// BenchmarkChurn is the cost per input of a random mix: members joining and leaving (which
// moves the target and plans, supersedes and takes steps), confirmations, offset reports and
// ticks. It reports ns/op per input.
func BenchmarkChurn(b *testing.B) {
	topic, now, groups := benchTopic(b)
	rng := rand.New(rand.NewPCG(1, 2))
	offsets := []autoscale.Offset{{Broker: "broker-a", Queue: 1, Committed: 100, Max: 100}}
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		g := []string{"g1", "g2"}[rng.IntN(2)]
		switch r := rng.IntN(10); {
		case r < 2 && len(groups[g]) < 48:
			next++
			groups[g] = append(groups[g], fmt.Sprintf("new-%d", next))
			topic.SetGroup(now, autoscale.Group{Name: g, Members: groups[g]})
		case r < 4 && len(groups[g]) > 16:
			groups[g] = groups[g][1:]
			topic.SetGroup(now, autoscale.Group{Name: g, Members: groups[g]})
		case r < 7:
			topic.Confirm(now, g, groups[g][rng.IntN(len(groups[g]))], topic.Layout())
		case r < 9:
			topic.ReportOffsets(now, g, offsets)
		default:
			topic.Tick(now)
		}
	}
}
