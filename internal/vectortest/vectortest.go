// Package vectortest runs recorded RocketMQ Java vectors through a plugin's own code natively,
// the way the host calls it: the request in canonical order, encoded, answered by the Go SDK's
// Allocate with the plugin's registered strategy, decoded and checked (abi.ValidateFor). Each
// vector is asked alone, and each group once as a whole, every member's answer compared.
package vectortest

import (
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/abi/plugin"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Run registers the strategy with the SDK (a test binary can hold one) and checks it against
// every vector of strategy in the file at path. It returns the number of vectors run, and fails t
// when there is none.
func Run(t *testing.T, path, strategy string, info abi.Info, prepare plugin.Prepare) int {
	t.Helper()
	plugin.RegisterPrepared(info, prepare)
	vs, err := rocketmq.LoadVectors(path)
	if err != nil {
		t.Fatal(err)
	}
	bs := rocketmq.Bindings(vs)
	groups := map[rocketmq.GroupKey]int{} // the first vector of each group
	count := 0
	for i := range vs {
		v := &vs[i]
		if v.Strategy != strategy {
			continue
		}
		count++
		if _, ok := groups[v.Key()]; !ok {
			groups[v.Key()] = i
		}
		req := v.Request(bs[i], false)
		resp, err := Allocate(&info, req)
		if err != nil {
			t.Errorf("line %d (%s): %v", v.Line, v.Family, err)
			continue
		}
		r := resp.Results[0]
		if d := v.Mismatch(queues(req, r), r.Failed, r.Err); d != "" {
			t.Errorf("line %d (%s): %s", v.Line, v.Family, d)
		}
	}
	if count == 0 {
		t.Fatalf("%s holds no %s vectors", path, strategy)
	}
	// Whole groups: every member's answer from one call, as the daemon asks.
	for i := range vs {
		v := &vs[i]
		first, ok := groups[v.Key()]
		if !ok || !v.MemberOfCidAll {
			continue
		}
		req := vs[first].Request(bs[first], true)
		resp, err := Allocate(&info, req)
		if err != nil {
			t.Errorf("line %d (%s), whole group: %v", v.Line, v.Family, err)
			continue
		}
		for k := 0; k < req.NumTargets(); k++ {
			if req.Target(k) != v.CID {
				continue
			}
			r := resp.Results[k]
			if d := v.Mismatch(queues(req, r), r.Failed, r.Err); d != "" {
				t.Errorf("line %d (%s), whole group: %s", v.Line, v.Family, d)
			}
			break
		}
	}
	return count
}

// Allocate answers req with the registered strategy as the host would: canonical order first,
// then the SDK's Allocate on the encoded request, the answer decoded and checked.
func Allocate(info *abi.Info, req *abi.Request) (*abi.Response, error) {
	abi.Canonicalize(req)
	in, err := abi.EncodeRequest(nil, req)
	if err != nil {
		return nil, err
	}
	out, err := plugin.Allocate(in)
	if err != nil {
		return nil, err
	}
	resp := &abi.Response{}
	if err := abi.DecodeResponse(out, resp); err != nil {
		return nil, err
	}
	if err := abi.ValidateFor(info, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func queues(req *abi.Request, r abi.Result) []abi.Queue {
	qs := make([]abi.Queue, len(r.Indices))
	for i, x := range r.Indices {
		qs[i] = req.Queues[x]
	}
	return qs
}
