package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// The RocketMQ strategies of the recorded vectors.
const (
	StrategyAvg            = "AVG"
	StrategyAvgByCircle    = "AVG_BY_CIRCLE"
	StrategyConsistentHash = "CONSISTENT_HASH"
)

// StrategyFor infers the vector strategy from a plugin name: averagely, circle and hash are the
// built-in plugins of AVG, AVG_BY_CIRCLE and CONSISTENT_HASH. It returns "" for other names.
func StrategyFor(name string) string {
	n := strings.ToLower(name)
	switch {
	case n == strings.ToLower(StrategyAvg) || strings.Contains(n, "averagely"):
		return StrategyAvg
	case strings.Contains(n, "circle"):
		return StrategyAvgByCircle
	case strings.Contains(n, "hash"):
		return StrategyConsistentHash
	}
	return ""
}

// vectors asks the plugin about every vector of its strategy, one consumer per request as Java
// computes, and compares the queues (in order) or the error with what Java returned or threw.
func (r *runner) vectors() error {
	strategy := strings.ToUpper(r.opts.Strategy)
	if strategy == "" {
		strategy = StrategyFor(r.info.Name)
	}
	switch strategy {
	case StrategyAvg, StrategyAvgByCircle, StrategyConsistentHash:
	case "":
		return fmt.Errorf("harness: vectors: cannot tell the strategy of plugin %q from its name; set the strategy (AVG, AVG_BY_CIRCLE or CONSISTENT_HASH)", r.info.Name)
	default:
		return fmt.Errorf("harness: vectors: unknown strategy %q; want AVG, AVG_BY_CIRCLE or CONSISTENT_HASH", strategy)
	}
	vs, err := rocketmq.LoadVectors(r.opts.Vectors)
	if err != nil {
		return fmt.Errorf("harness: vectors: %w", err)
	}
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
		sc := &Scenario{Group: v.Group, CID: v.CID, MQAll: make([]abi.Queue, len(v.MQAll)), CIDAll: slices.Clone(v.CIDAll), Config: r.config()}
		for j, q := range v.MQAll {
			sc.MQAll[j] = abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}
		}
		if strategy == StrategyConsistentHash {
			if sc.Config == nil {
				sc.Config = map[string]string{}
			}
			if v.VnodesDefault {
				delete(sc.Config, "vnodes")
			} else {
				sc.Config["vnodes"] = strconv.Itoa(v.Vnodes)
			}
		}
		req := sc.Request()
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
	var res abi.Result
	if err == nil {
		if len(resp.Results) != 1 {
			return fmt.Sprintf("%d results for one consumer", len(resp.Results))
		}
		res = resp.Results[0]
	}
	if want := v.WantError(); v.Error != "" {
		switch {
		case err != nil && strings.Contains(err.Error(), want):
			return ""
		case err != nil:
			return fmt.Sprintf("consumer %q: the call failed (%v) where Java threw %q", v.CID, err, want)
		case res.Failed && strings.Contains(res.Err, want):
			return ""
		default:
			return fmt.Sprintf("consumer %q: the plugin answered %s where Java threw %q", v.CID, formatResult(res), want)
		}
	}
	if err != nil {
		return fmt.Sprintf("consumer %q: the call failed (%v) where Java returned %v", v.CID, err, v.Result)
	}
	if res.Failed {
		return fmt.Sprintf("consumer %q: the plugin answered the error %q where Java returned %v", v.CID, res.Err, v.Result)
	}
	// The host sorts mqAll, so map the answer back to indices into the vector's own mqAll.
	got := make([]int, len(res.Indices))
	for i, x := range res.Indices {
		q := req.Queues[x]
		got[i] = slices.IndexFunc(v.MQAll, func(m rocketmq.Queue) bool {
			return m.Topic == q.Topic && m.BrokerName == q.BrokerName && m.QueueID == q.QueueID
		})
	}
	if !slices.Equal(got, v.Result) {
		return fmt.Sprintf("consumer %q: the plugin answered %s, Java returned %s (indices into the vector's mqAll)", v.CID, formatIndices(got), formatIndices(v.Result))
	}
	return ""
}
