package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// The RocketMQ strategies of the recorded vectors.
const (
	StrategyAvg            = rocketmq.StrategyAvg
	StrategyAvgByCircle    = rocketmq.StrategyAvgByCircle
	StrategyConsistentHash = rocketmq.StrategyConsistentHash
	StrategyConfig         = rocketmq.StrategyConfig
	StrategyMachineRoom    = rocketmq.StrategyMachineRoom
	StrategyNearby         = rocketmq.StrategyNearby
)

var strategies = []string{StrategyAvg, StrategyAvgByCircle, StrategyConsistentHash, StrategyConfig, StrategyMachineRoom, StrategyNearby}

// Strategies lists the strategies of the recorded vectors, as Options.Strategy names them.
func Strategies() []string { return slices.Clone(strategies) }

// StrategyFor infers the vector strategy from a plugin name: averagely, circle, hash, config,
// machineroom and nearby are the built-in plugins of AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG,
// MACHINE_ROOM and MACHINE_ROOM_NEARBY. It returns "" for other names.
func StrategyFor(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "nearby"):
		return StrategyNearby
	case strings.Contains(n, "machineroom") || strings.Contains(n, "machine_room"):
		return StrategyMachineRoom
	case n == strings.ToLower(StrategyAvg) || strings.Contains(n, "averagely"):
		return StrategyAvg
	case strings.Contains(n, "circle"):
		return StrategyAvgByCircle
	case strings.Contains(n, "hash"):
		return StrategyConsistentHash
	case n == "config" || strings.Contains(n, "byconfig"):
		return StrategyConfig
	}
	return ""
}

// vectors asks the plugin about every vector of its strategy, one consumer per request as Java
// computes, and compares the queues (in order) or the error with what Java returned or threw. A
// vector's strategy settings (CONSISTENT_HASH's vnodes, MACHINE_ROOM's consumeridcs,
// MACHINE_ROOM_NEARBY's inner and rooms, CONFIG's lists) override the binding's config and become
// the request's labels (rocketmq.Bindings).
func (r *runner) vectors() error {
	strategy := strings.ToUpper(r.opts.Strategy)
	if strategy == "" {
		strategy = StrategyFor(r.info.Name)
	}
	want := strings.Join(strategies, ", ")
	switch {
	case strategy == "":
		return fmt.Errorf("harness: vectors: cannot tell the strategy of plugin %q from its name; set the strategy (%s)", r.info.Name, want)
	case !slices.Contains(strategies, strategy):
		return fmt.Errorf("harness: vectors: unknown strategy %q; want %s", strategy, want)
	}
	vs, err := rocketmq.LoadVectors(r.opts.Vectors)
	if err != nil {
		return fmt.Errorf("harness: vectors: %w", err)
	}
	bindings := rocketmq.Bindings(vs)
	total, matched := 0, 0
	for i := range vs {
		v := &vs[i]
		if v.Strategy != strategy {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		total++
		b := bindings[i]
		sc := &Scenario{Group: v.Group, CID: v.CID, CIDAll: slices.Clone(v.CIDAll), Config: r.config()}
		req := v.Request(b, false)
		sc.MQAll = slices.Clone(req.Queues)
		sc.QueueAttrs, sc.ConsumerAttrs = req.QueueAttrs, req.ConsumerAttrs
		for _, k := range rocketmq.SettledKeys(strategy) {
			delete(sc.Config, k)
		}
		for k, val := range b.Config {
			if sc.Config == nil {
				sc.Config = map[string]string{}
			}
			sc.Config[k] = val
		}
		req = sc.Request()
		req.Targets = []string{v.CID} // also when the cid is "" (Java's "currentCID is empty")
		resp, err := r.p.Allocate(r.ctx, req)
		r.calls.Add(1)
		if reason := compareVector(v, req, resp, err); reason != "" {
			r.fail(CheckVectors, reason, fmt.Sprintf("%s line %d (%s)", r.opts.Vectors, v.Line, v.Family), sc, nil)
			continue
		}
		matched++
	}
	if total == 0 {
		return fmt.Errorf("harness: vectors: %s holds no %s vectors", r.opts.Vectors, strategy)
	}
	r.vectorsDetail = fmt.Sprintf("%d of %d %s vectors match", matched, total, strategy)
	if matched < total {
		r.vectorsDetail = fmt.Sprintf("%d of %d %s vectors differ from the recorded answers", total-matched, total, strategy)
	}
	return nil
}

func compareVector(v *rocketmq.Vector, req *abi.Request, resp *abi.Response, err error) string {
	if err != nil {
		if _, failed := v.Want(); failed && strings.Contains(err.Error(), v.WantError()) {
			return ""
		}
		return fmt.Sprintf("consumer %q: the call failed (%v); Java %s", v.CID, err, javaOutcome(v))
	}
	if len(resp.Results) != 1 {
		return fmt.Sprintf("%d results for one consumer", len(resp.Results))
	}
	res := resp.Results[0]
	// The host sorts mqAll, so the answer is compared as queues, not as indices.
	got := make([]abi.Queue, len(res.Indices))
	for i, x := range res.Indices {
		got[i] = req.Queues[x]
	}
	if d := v.Mismatch(got, res.Failed, res.Err); d != "" {
		return fmt.Sprintf("%s; the plugin answered %s", d, formatResult(res))
	}
	return ""
}

func javaOutcome(v *rocketmq.Vector) string {
	if want, failed := v.Want(); !failed {
		return fmt.Sprintf("returned %v", want)
	}
	return fmt.Sprintf("threw %q", v.Error)
}
