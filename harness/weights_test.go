package harness_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/harness"
)

// TestGenerateAttributes: the generated groups carry what strategies read: consumer labels zone
// and weight (with the weight metric, as the daemon sends it, and a weight of 0 now and then),
// queue labels zone and the metric lag, and previous owners, some of them gone.
func TestGenerateAttributes(t *testing.T) {
	seen := map[string]int{}
	for i := range 300 {
		s := harness.Generate(7, i)
		for j, a := range s.ConsumerAttrs {
			if a.Labels["zone"] != "" {
				seen["consumer zone"]++
			}
			if v, ok := a.Labels[harness.WeightLabel]; ok {
				seen["consumer weight"]++
				w, err := strconv.ParseInt(v, 10, 64)
				if err != nil || a.Metrics[harness.WeightLabel] != w {
					t.Fatalf("scenario %d consumer %d: weight label %q, metric %d", i, j, v, a.Metrics[harness.WeightLabel])
				}
				if w == 0 {
					seen["weight 0"]++
				}
			}
		}
		for _, a := range s.QueueAttrs {
			if a.Labels["zone"] != "" {
				seen["queue zone"]++
			}
			if _, ok := a.Metrics["lag"]; ok {
				seen["queue lag"]++
			}
		}
		for _, o := range s.PrevOwners {
			switch {
			case o == "":
			case slices.Contains(s.CIDAll, o):
				seen["previous owner present"]++
			default:
				seen["previous owner gone"]++
			}
		}
	}
	for _, want := range []string{"consumer zone", "consumer weight", "weight 0", "queue zone", "queue lag", "previous owner present", "previous owner gone"} {
		if seen[want] < 10 {
			t.Errorf("%d generated %s, want at least 10 (%v)", seen[want], want, seen)
		}
	}
}

// nativeWeighted gives each member a contiguous block of queues, its weighted share by largest
// remainder (ties to the lower index); with equal weights that is RocketMQ's AVG.
func nativeWeighted(props ...string) *native {
	return &native{abi.Info{Name: "weighted", Version: "native", Properties: props},
		func(req *abi.Request) func(int) []int {
			n, q := len(req.Consumers), len(req.Queues)
			w := make([]int64, n)
			var total int64
			for j := range w {
				w[j] = 1
				if j < len(req.ConsumerAttrs) {
					if v, ok := req.ConsumerAttrs[j].Labels["weight"]; ok {
						w[j], _ = strconv.ParseInt(v, 10, 64)
					}
				}
				total += w[j]
			}
			if total == 0 {
				for j := range w {
					w[j] = 1
				}
				total = int64(n)
			}
			size := make([]int, n)
			rest := q
			for j := range w {
				size[j] = int(int64(q) * w[j] / total)
				rest -= size[j]
			}
			order := make([]int, n)
			for j := range order {
				order[j] = j
			}
			rem := func(j int) int64 { return int64(q) * w[j] % total }
			slices.SortStableFunc(order, func(a, b int) int { return int(rem(b) - rem(a)) })
			for _, j := range order[:rest] {
				size[j]++
			}
			start := make([]int, n+1)
			for j := range size {
				start[j+1] = start[j] + size[j]
			}
			return func(self int) []int {
				if self < 0 {
					return nil
				}
				var out []int
				for i := start[self]; i < start[self+1]; i++ {
					out = append(out, i)
				}
				return out
			}
		}}
}

// TestWeightedBalance: a plugin promising "balanced" and "weighted" is judged against its weights:
// one that honours them passes, AVG (which ignores them) fails with the smallest group that shows
// it, and AVG promising only "balanced" passes, its weights ignored.
func TestWeightedBalance(t *testing.T) {
	opts := harness.Options{Scenarios: 30}
	rep := run(t, nativeWeighted(abi.PropBalanced, harness.PropWeighted), opts)
	requirePass(t, rep)
	if c := rep.Check(harness.CheckBalance); c.Status != harness.Pass || c.Of == 0 || !strings.Contains(c.Detail, "weighted share") {
		t.Errorf("balance of a weighted plugin: %+v", c)
	}

	avg := nativeAveragely()
	avg.info.Properties = []string{abi.PropBalanced, harness.PropWeighted}
	f := requireFailure(t, run(t, avg, opts), harness.CheckBalance, "where its weighted share is", 8, 3)
	if f.Scenario.ConsumerAttrs == nil {
		t.Errorf("the smallest weighted failure lost its weights: %+v", f.Scenario)
	}

	requirePass(t, run(t, nativeAveragely(), opts))
	// Without the promise, the distance from the weighted shares is a figure.
	w := nativeWeighted()
	c := run(t, w, opts).Check(harness.CheckBalance)
	if c.Status != harness.Figure || !strings.Contains(c.Detail, "from a member's weighted share in the") {
		t.Errorf("balance figure: %+v", c)
	}
}
