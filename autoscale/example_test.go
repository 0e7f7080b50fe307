package autoscale_test

import (
	"fmt"
	"time"

	"github.com/allocd/allocd/autoscale"
)

// The daemon's side of one topic: feed it facts with the time, apply the steps it returns,
// and tick it at its deadline.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := autoscale.DefaultPolicy()
	policy.Enabled = true
	topic, err := autoscale.New("orders", policy, []autoscale.Broker{{Name: "broker-a", Read: 2, Write: 2}})
	if err != nil {
		panic(err)
	}
	apply := func(out autoscale.Output) {
		for _, s := range out.Steps {
			fmt.Printf("%s %s %s %d -> %d\n", s.Broker, s.Kind, topic.Name(), s.From, s.To)
		}
	}

	// Three consumers of group g1 are live: read rises to 3 at once.
	out, _ := topic.SetGroup(start, autoscale.Group{Name: "g1", Members: []string{"c1", "c2", "c3"}})
	apply(out)

	// Each applies the new generation and says so in its next heartbeat.
	for _, c := range []string{"c1", "c2", "c3"} {
		out, _ = topic.Confirm(start.Add(2*time.Second), "g1", c, topic.Layout())
		apply(out)
	}

	// The daemon's timer fires at the deadline: write follows.
	due, _ := topic.NextDeadline()
	fmt.Println("tick after", due.Sub(start))
	apply(topic.Tick(due))
	// Output:
	// broker-a set-read orders 2 -> 3
	// tick after 10s
	// broker-a set-write orders 2 -> 3
}
