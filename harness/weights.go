package harness

import (
	"math"
	"strconv"

	"github.com/allocd/allocd/abi"
)

// PropWeighted, promised together with "balanced" (abi.PropBalanced), says that the plugin
// balances by weight: in every whole-group answer each member's number of queues is its weighted
// share, assigned*w/W, rounded down or up, where w is the member's weight and W the sum over the
// members. With equal weights that is "queue counts differ by at most one". A member's weight is
// its consumer label "weight", a whole number (the daemon sends it as that label and as the metric
// of the same name, and refuses a heartbeat whose weight label is not an integer in [0, 10⁶]); a
// member without one weighs 1, and when every weight is 0 they all count as equal. A plugin
// declares it in its self-description: Properties: []string{"balanced", "weighted"}.
const PropWeighted = "weighted"

// WeightLabel is the consumer label (and metric) that carries a member's weight.
const WeightLabel = "weight"

// weightOf is the weight of consumer j of req: its "weight" label, else its "weight" metric,
// else 1. A label that is not a whole number counts as 1, as the daemon never sends one.
func weightOf(req *abi.Request, j int) int64 {
	if j >= len(req.ConsumerAttrs) {
		return 1
	}
	a := req.ConsumerAttrs[j]
	if v, ok := a.Labels[WeightLabel]; ok {
		if w, err := strconv.ParseInt(v, 10, 64); err == nil && w >= 0 {
			return w
		}
		return 1
	}
	if w, ok := a.Metrics[WeightLabel]; ok && w >= 0 {
		return w
	}
	return 1
}

// hasWeights reports whether any consumer of req carries a weight.
func hasWeights(req *abi.Request) bool {
	for _, a := range req.ConsumerAttrs {
		if _, ok := a.Labels[WeightLabel]; ok {
			return true
		}
		if _, ok := a.Metrics[WeightLabel]; ok {
			return true
		}
	}
	return false
}

// weightedShares returns, per distinct member (its first index in cidAll), its weight, and the
// total weight. When every weight is 0 every member weighs 1.
func weightedShares(req *abi.Request) (map[string]int64, int64) {
	w := make(map[string]int64, len(req.Consumers))
	var total int64
	for j, c := range req.Consumers {
		if _, seen := w[c]; seen {
			continue
		}
		w[c] = weightOf(req, j)
		total += w[c]
	}
	if total == 0 {
		for c := range w {
			w[c] = 1
		}
		total = int64(len(w))
	}
	return w, total
}

// weightedOff returns the member furthest from its weighted share of assigned queues, how far
// (in queues), and whether every member is within its share rounded down or up.
func weightedOff(req *abi.Request, count map[string]int, assigned int) (worst string, off float64, within bool) {
	w, total := weightedShares(req)
	within = true
	for _, c := range req.Consumers {
		// count*W must lie strictly within (assigned*w - W, assigned*w + W).
		d := int64(count[c])*total - int64(assigned)*w[c]
		if d <= -total || d >= total {
			within = false
		}
		if f := math.Abs(float64(d) / float64(total)); f > off || worst == "" {
			worst, off = c, f
		}
	}
	return worst, off, within
}

// share is member c's weighted share of assigned queues, for messages.
func share(req *abi.Request, c string, assigned int) float64 {
	w, total := weightedShares(req)
	return float64(assigned) * float64(w[c]) / float64(total)
}
