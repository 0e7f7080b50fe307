package autoscale_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
)

func enabled() autoscale.Policy {
	p := autoscale.DefaultPolicy()
	p.Enabled = true
	return p
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		topic   string
		brokers []autoscale.Broker
		want    string
	}{
		{"no topic name", "", nil, "topic with no name"},
		{"no broker name", "t", []autoscale.Broker{{Read: 1, Write: 1}}, "broker with no name"},
		{"negative read", "t", []autoscale.Broker{{Name: "a", Read: -1}}, "broker a: read count -1 out of range"},
		{"write above read", "t", []autoscale.Broker{{Name: "a", Read: 2, Write: 3}}, "broker a: write count 3 out of range [0,2]"},
		{"duplicate broker", "t", []autoscale.Broker{{Name: "a"}, {Name: "a"}}, "broker a listed twice"},
	} {
		_, err := autoscale.New(tc.topic, enabled(), tc.brokers)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestInputsReject(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	topic, err := autoscale.New("t", enabled(), []autoscale.Broker{{Name: "a", Read: 2, Write: 2}})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(topic.State())
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v, want an error containing %q", what, err, want)
		}
		if after, _ := json.Marshal(topic.State()); string(after) != string(before) {
			t.Errorf("%s failed but changed the state", what)
		}
	}
	_, err = topic.SetGroup(now, autoscale.Group{Members: []string{"m1"}})
	check("SetGroup with no name", err, "group with no name")
	_, err = topic.SetGroup(now, autoscale.Group{Name: "g", Members: []string{"m1", "m1"}})
	check("SetGroup with a duplicate", err, "group g: member m1 listed twice")
	_, err = topic.SetGroup(now, autoscale.Group{Name: "g", Members: []string{""}})
	check("SetGroup with an empty id", err, "group g: member with no id")
	_, err = topic.SetGroup(now, autoscale.Group{Name: "g", Model: 7})
	check("SetGroup with a bad model", err, "group g: unknown message model 7")
	_, err = topic.Confirm(now, "g", "m1", 5)
	check("Confirm of a future layout", err, "member m1 of group g confirmed layout 5, newer than the topic's layout 1")
	_, err = topic.ReportOffsets(now, "g", []autoscale.Offset{{Broker: "a", Queue: 0}, {Broker: "a", Queue: -1}})
	check("ReportOffsets with a negative queue", err, `offset report of group "g": broker a queue -1 out of range`)
	_, err = topic.ReportOffsets(now, "", []autoscale.Offset{{Queue: 3}})
	check("ReportOffsets with no broker", err, "queue 3 with no broker")
	_, err = topic.SetBroker(now, autoscale.Broker{Name: "a", Read: 1, Write: 2})
	check("SetBroker with write above read", err, "broker a: write count 2 out of range [0,1]")
	bad := enabled()
	bad.Min = 0
	_, err = topic.SetPolicy(now, bad)
	check("SetPolicy with min 0", err, "policy min 0 out of range")
}

func TestRestoreRejects(t *testing.T) {
	good := func() autoscale.State {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		topic, err := autoscale.New("t", enabled(), []autoscale.Broker{{Name: "a", Read: 2, Write: 2}})
		if err != nil {
			t.Fatal(err)
		}
		topic.SetGroup(now, autoscale.Group{Name: "g", Members: []string{"m1", "m2", "m3"}}) // raise read to 3
		topic.ReportOffsets(now, "g", []autoscale.Offset{{Broker: "a", Queue: 1, Committed: 5, Max: 5}})
		return topic.State()
	}
	if _, err := autoscale.Restore(good()); err != nil {
		t.Fatalf("Restore(good) = %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*autoscale.State)
		want   string
	}{
		{"version", func(s *autoscale.State) { s.Version = 2 }, "state version 2, want 1"},
		{"policy", func(s *autoscale.State) { s.Policy.Min = 0 }, "policy min 0"},
		{"broker", func(s *autoscale.State) { s.Brokers[0].Write = 9 }, "write count 9 out of range"},
		{"layout", func(s *autoscale.State) { s.Layout = 0 }, "layout 0, want at least 1"},
		{"pending generation", func(s *autoscale.State) { s.Pending.Generation = 9 }, "pending generation 9 out of range [1,1]"},
		{"pending layout", func(s *autoscale.State) { s.Pending.Layout = 7 }, "pending layout 7 out of range [1,2]"},
		{"pending phase", func(s *autoscale.State) { s.Pending.Phase = autoscale.Idle }, "pending step in phase idle"},
		{"lower-write without clock", func(s *autoscale.State) { s.Pending.Phase = autoscale.LowerWrite }, "lower-write without writeLowSince"},
		{"member layout", func(s *autoscale.State) { s.Groups[0].Members[0].Layout = 3 }, "member m1 confirmed layout 3, newer than layout 2"},
		{"duplicate group", func(s *autoscale.State) { s.Groups = append(s.Groups, s.Groups[0]) }, "group g listed twice"},
		{"commit broker", func(s *autoscale.State) { s.Commits[0].Broker = "z" }, `commit of group g on unknown broker "z"`},
		{"commit queue", func(s *autoscale.State) { s.Commits[0].Queue = 3 }, "commit of group g on a queue 3 out of range [0,3)"},
	} {
		s := good()
		tc.change(&s)
		_, err := autoscale.Restore(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Restore = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestModelText(t *testing.T) {
	for _, m := range []autoscale.Model{autoscale.Clustering, autoscale.Broadcasting} {
		text, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back autoscale.Model
		if err := back.UnmarshalText(text); err != nil || back != m {
			t.Errorf("%v: round trip gave %v, %v", m, back, err)
		}
	}
	var m autoscale.Model
	if err := m.UnmarshalText([]byte("CLUSTERING")); err != nil || m != autoscale.Clustering {
		t.Errorf("RocketMQ's CLUSTERING: %v, %v", m, err)
	}
	if err := m.UnmarshalText([]byte("queueing")); err == nil {
		t.Errorf("accepted model queueing")
	}
}

// TestChurn drives topics with random membership churn, confirmations, offset reports,
// operator changes and restarts, checking after every input that write never exceeds read and
// that nothing due is left undone; then it stops the churn, lets the consumers catch up, and
// checks that every topic converges to its target and goes idle: no rule gives up or waits
// forever once the facts allow the step. Two runs of the same seed must produce identical
// outputs: the state machine is deterministic.
func TestChurn(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		a := churn(t, seed)
		b := churn(t, seed)
		if a != b {
			t.Fatalf("seed %d: two runs of the same inputs differ", seed)
		}
	}
}

func churn(t *testing.T, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := enabled()
	p.Max = 12
	topic, err := autoscale.New("t", p, []autoscale.Broker{{Name: "a", Read: 4, Write: 4}, {Name: "b", Read: 2, Write: 1}})
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{}
	var log strings.Builder
	record := func(out autoscale.Output) {
		for _, e := range out.Events {
			fmt.Fprintf(&log, "%s %s %s\n", e.Time.Format(time.TimeOnly), e.Kind, e.Message)
		}
		for _, b := range topic.Brokers() {
			if b.Write > b.Read {
				t.Fatalf("seed %d at %s: broker %s write %d above read %d", seed, now, b.Name, b.Write, b.Read)
			}
		}
		if due, ok := topic.NextDeadline(); ok && !due.After(now) {
			t.Fatalf("seed %d at %s: deadline %s already passed", seed, now, due)
		}
	}
	must := func(out autoscale.Output, err error) autoscale.Output {
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return out
	}
	member := 0
	for i := 0; i < 400; i++ {
		now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
		var out autoscale.Output
		switch r := rng.IntN(100); {
		case r < 30: // a member joins
			g := []string{"g1", "g2", "g3"}[rng.IntN(3)]
			member++
			groups[g] = append(groups[g], fmt.Sprintf("m%d", member))
			model := autoscale.Clustering
			if g == "g3" {
				model = autoscale.Broadcasting
			}
			out = must(topic.SetGroup(now, autoscale.Group{Name: g, Model: model, Members: groups[g]}))
		case r < 55: // a member leaves
			g := []string{"g1", "g2", "g3"}[rng.IntN(3)]
			if len(groups[g]) == 0 {
				continue
			}
			k := rng.IntN(len(groups[g]))
			groups[g] = append(groups[g][:k:k], groups[g][k+1:]...)
			model := autoscale.Clustering
			if g == "g3" {
				model = autoscale.Broadcasting
			}
			out = must(topic.SetGroup(now, autoscale.Group{Name: g, Model: model, Members: groups[g]}))
		case r < 75: // members confirm the current layout
			for _, g := range []string{"g1", "g2"} {
				for _, m := range groups[g] {
					if rng.IntN(4) > 0 {
						out = must(topic.Confirm(now, g, m, topic.Layout()))
						record(out)
					}
				}
			}
			continue
		case r < 90: // offsets, some behind
			var offsets []autoscale.Offset
			for _, b := range topic.Brokers() {
				for q := 0; q < b.Read; q++ {
					max := int64(rng.IntN(3))
					offsets = append(offsets, autoscale.Offset{Broker: b.Name, Queue: q, Committed: max - int64(rng.IntN(2)), Max: max})
				}
			}
			out = must(topic.ReportOffsets(now, []string{"g1", "g2", "old"}[rng.IntN(3)], offsets))
		case r < 93: // the operator overrides a broker
			read := rng.IntN(8)
			out = must(topic.SetBroker(now, autoscale.Broker{Name: "b", Read: read, Write: rng.IntN(read + 1)}))
		case r < 96: // a restart
			js, _ := json.Marshal(topic.State())
			var s autoscale.State
			if err := json.Unmarshal(js, &s); err != nil {
				t.Fatal(err)
			}
			if topic, err = autoscale.Restore(s); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			out = topic.Tick(now)
		default:
			out = topic.Tick(now)
		}
		record(out)
	}

	// The churn stops. The members confirm, every queue is consumed to the end and quiet, and
	// the daemon's timer runs until nothing is pending.
	for _, g := range []string{"g1", "g2"} {
		for _, m := range groups[g] {
			record(must(topic.Confirm(now, g, m, topic.Layout())))
		}
	}
	for step := 0; ; step++ {
		if step > 100 {
			t.Fatalf("seed %d: still not idle after 100 deadlines: %+v", seed, topic.Status().Pending)
		}
		var offsets []autoscale.Offset
		for _, b := range topic.Brokers() {
			for q := 0; q < b.Read; q++ {
				offsets = append(offsets, autoscale.Offset{Broker: b.Name, Queue: q, Committed: 10, Max: 10, LastWrite: now.Add(-time.Hour)})
			}
		}
		for _, g := range []string{"g1", "g2", "old"} {
			record(must(topic.ReportOffsets(now, g, offsets)))
		}
		due, ok := topic.NextDeadline()
		if !ok {
			break
		}
		now = due
		record(topic.Tick(now))
	}
	st := topic.Status()
	for _, b := range st.Brokers {
		if b.Read != st.Target || b.Write != st.Target {
			t.Fatalf("seed %d: idle but broker %s has read %d write %d, target %d", seed, b.Name, b.Read, b.Write, st.Target)
		}
	}
	want := max(len(groups["g1"]), len(groups["g2"]), p.Min)
	if st.Target != min(want, p.Max) {
		t.Fatalf("seed %d: target %d, want %d", seed, st.Target, min(want, p.Max))
	}
	return log.String()
}

// FuzzRestore feeds Restore arbitrary state documents: it must refuse or accept them without
// panicking, and a topic it accepts must keep its invariants through a tick.
func FuzzRestore(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	topic, _ := autoscale.New("t", enabled(), []autoscale.Broker{{Name: "a", Read: 4, Write: 4}})
	topic.SetGroup(now, autoscale.Group{Name: "g", Members: []string{"m1", "m2"}})
	topic.ReportOffsets(now, "g", []autoscale.Offset{{Broker: "a", Queue: 3, Committed: 1, Max: 2}})
	seed, _ := json.Marshal(topic.State())
	f.Add(seed)
	topic.Tick(now.Add(time.Minute))
	seed, _ = json.Marshal(topic.State())
	f.Add(seed)
	f.Add([]byte(`{"version":1,"topic":"t","policy":{"min":1,"max":4,"shrinkReadDelay":"1s"},"layout":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s autoscale.State
		if json.Unmarshal(data, &s) != nil {
			return
		}
		topic, err := autoscale.Restore(s)
		if err != nil {
			return
		}
		js1, _ := json.Marshal(topic.State())
		var s2 autoscale.State
		if err := json.Unmarshal(js1, &s2); err != nil {
			t.Fatalf("State of a restored topic does not decode: %v", err)
		}
		again, err := autoscale.Restore(s2)
		if err != nil {
			t.Fatalf("State of a restored topic does not restore: %v", err)
		}
		if js2, _ := json.Marshal(again.State()); string(js1) != string(js2) {
			t.Fatalf("round trip differs:\n%s\n%s", js1, js2)
		}
		at := now
		if due, ok := topic.NextDeadline(); ok && due.After(at) && due.Before(at.Add(1000*time.Hour)) {
			at = due
		}
		topic.Tick(at)
		for _, b := range topic.Brokers() {
			if b.Write > b.Read {
				t.Fatalf("broker %s: write %d above read %d", b.Name, b.Write, b.Read)
			}
		}
		if !reflect.DeepEqual(topic.Brokers(), topic.Status().Brokers) {
			t.Fatalf("Status and Brokers disagree")
		}
	})
}
