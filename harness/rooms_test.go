package harness_test

import (
	"context"
	"slices"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/nearby"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// byRoom is a native MACHINE_ROOM_NEARBY around averagely: package nearby over the request's
// labels "zone", as plugins/nearby's wasm runs it. With ignoreZones it is averagely claiming to
// be zoned, a plugin that breaks its promise.
type byRoom struct {
	info        abi.Info
	ignoreZones bool
}

func (p *byRoom) Info() abi.Info { return p.info }

func (p *byRoom) Allocate(_ context.Context, req *abi.Request) (*abi.Response, error) {
	abi.Canonicalize(req)
	label := func(attrs []abi.Attrs, i int) (string, bool) {
		if attrs == nil {
			return "", false
		}
		z, ok := attrs[i].Labels[rocketmq.LabelZone]
		return z, ok
	}
	g := nearby.New(nearby.Input{
		N: len(req.Queues), C: len(req.Consumers),
		Queue: func(i int) (string, string, int32) {
			q := req.Queues[i]
			return q.Topic, q.BrokerName, q.QueueID
		},
		Consumer:     func(j int) string { return req.Consumers[j] },
		QueueRoom:    func(i int) (string, bool) { return label(req.QueueAttrs, i) },
		ConsumerRoom: func(j int) (string, bool) { return label(req.ConsumerAttrs, j) },
	}, nearby.Inner{})
	resp := &abi.Response{}
	for t := range req.NumTargets() {
		cid := req.Target(t)
		if err := rocketmq.Check(cid, len(req.Queues), len(req.Consumers)); err != nil {
			resp.Results = append(resp.Results, abi.Result{Failed: true, Err: err.Error()})
			continue
		}
		self := slices.Index(req.Consumers, cid)
		var got []int
		var err error
		switch {
		case self < 0:
		case p.ignoreZones:
			got = averagely.Allocate(nil, len(req.Queues), len(req.Consumers), self)
		default:
			got, err = g.Allocate(nil, self)
		}
		if err != nil {
			resp.Results = append(resp.Results, abi.Result{Failed: true, Err: err.Error()})
			continue
		}
		resp.Results = append(resp.Results, abi.Result{Indices: got})
	}
	return resp, nil
}

// TestZoned: a plugin that declares "zoned" is checked on scenarios whose every queue and consumer
// has a zone, and passes when each queue of a zone with members goes to one of them; averagely
// claiming the same fails the check, with a small scenario. Without the promise, the figure is
// reported and nothing fails.
func TestZoned(t *testing.T) {
	zoned := abi.Info{Name: "nearby", Version: "native", Properties: []string{abi.PropZoned}}
	rep := run(t, &byRoom{info: zoned}, harness.Options{Seed: 4, Scenarios: 24})
	requirePass(t, rep)
	if c := rep.Check(harness.CheckZones); c.Status != harness.Pass {
		t.Fatalf("zones: %+v", c)
	}
	if err := harness.Quick(context.Background(), &byRoom{info: zoned}, nil); err != nil {
		t.Fatalf("Quick: %v", err)
	}

	rep = run(t, &byRoom{info: zoned, ignoreZones: true}, harness.Options{Seed: 4, Scenarios: 24})
	requireFailure(t, rep, harness.CheckZones, "though zone", 8, 4)

	// The same plugin without the promise fails every member of the many scenarios without zones.
	rep = run(t, &byRoom{info: abi.Info{Name: "nearby", Version: "native"}}, harness.Options{Seed: 4, Scenarios: 24})
	if c := rep.Check(harness.CheckErrors); c.Status != harness.Fail {
		t.Fatalf("errors without zones: %+v", c)
	}
	if c := rep.Check(harness.CheckZones); c.Status != harness.Figure {
		t.Fatalf("zones not promised: %+v", c)
	}
}

// needsConfig fails every member unless the binding sets "rooms", as MACHINE_ROOM without its set.
type needsConfig struct{ info abi.Info }

func (p *needsConfig) Info() abi.Info { return p.info }

func (p *needsConfig) Allocate(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for range req.NumTargets() {
		if req.Config["rooms"] == "" {
			resp.Results = append(resp.Results, abi.Result{Failed: true, Err: "rooms never set"})
			continue
		}
		resp.Results = append(resp.Results, abi.Result{Indices: []int{}})
	}
	return resp, nil
}

// TestCheckConfig: the harness binds a plugin with its self-described CheckConfig when it is given
// no config, and with the given config otherwise.
func TestCheckConfig(t *testing.T) {
	info := abi.Info{Name: "rooms", Version: "native", Properties: []string{abi.PropPartial}}
	if err := harness.Quick(context.Background(), &needsConfig{info}, nil); err == nil {
		t.Fatal("Quick passed a plugin that fails without config")
	}
	info.CheckConfig = map[string]string{"rooms": "a"}
	if err := harness.Quick(context.Background(), &needsConfig{info}, nil); err != nil {
		t.Fatalf("Quick with CheckConfig: %v", err)
	}
	requirePass(t, run(t, &needsConfig{info}, harness.Options{Scenarios: 5}))
	rep := run(t, &needsConfig{info}, harness.Options{Scenarios: 5, Config: map[string]string{"other": "x"}})
	if c := rep.Check(harness.CheckErrors); c.Status != harness.Fail {
		t.Fatalf("a given config replaces CheckConfig: %+v", c)
	}
}

// TestRoomsVectors: the vectors check reads the rooms vectors' settings. A nearby that always
// splits by averagely matches every vector of inner AVG (rooms from the labels, Java's errors) and
// fails those of the other inners.
func TestRoomsVectors(t *testing.T) {
	zoned := abi.Info{Name: "nearby", Version: "native", Properties: []string{abi.PropZoned}}
	rep := run(t, &byRoom{info: zoned}, harness.Options{Seed: 4, Scenarios: 2, Vectors: "../testdata/rocketmq-java-vectors-rooms-small.jsonl"})
	c := rep.Check(harness.CheckVectors)
	vs, err := rocketmq.LoadVectors("../testdata/rocketmq-java-vectors-rooms-small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	avg, other := 0, 0
	for _, v := range vs {
		switch {
		case v.Strategy != rocketmq.StrategyNearby:
		case v.Inner == rocketmq.StrategyAvg:
			avg++
		default:
			other++
		}
	}
	if c.Status != harness.Fail || c.Failures == 0 || c.Failures >= other || avg == 0 {
		t.Fatalf("vectors: %+v (%d AVG, %d other inner)", c, avg, other)
	}
}
