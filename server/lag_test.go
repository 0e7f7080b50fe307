package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/model"
)

// The group list and status carry the state, the generation per topic and the lag the owners
// report in their heartbeats' offsets.
func TestGroupLagAndState(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":2,"writeQueues":2}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	var groups struct{ Groups []coordinator.GroupSummary }
	if e.do("GET", "/v1/groups", "", &groups); len(groups.Groups) != 1 || groups.Groups[0].State != model.StateRebalancing {
		t.Fatalf("list before the first generation: %+v, want rebalancing", groups)
	}
	e.tick(time.Second)
	body := `{"cid":"c1","topics":["T"],"offsets":{"T":[{"brokerName":"broker-a","queueId":0,"committed":3,"max":10},{"brokerName":"broker-a","queueId":1,"max":5}]}}`
	if code := e.do("POST", "/v1/groups/g/heartbeat", body, nil); code != http.StatusOK {
		t.Fatalf("heartbeat with offsets: %d", code)
	}
	var status coordinator.GroupStatus
	e.do("GET", "/v1/groups/g", "", &status)
	ts := status.Topics["T"]
	if status.State != model.StateStable || ts.Lag == nil || *ts.Lag != 7 || len(ts.Offsets) != 2 || ts.Offsets[1].Lag != nil || ts.Offsets[1].Committed != -1 {
		t.Fatalf("status: state %q lag %v offsets %+v; want stable, lag 7, queue 1 without lag", status.State, ts.Lag, ts.Offsets)
	}
	e.do("GET", "/v1/groups", "", &groups)
	if g := groups.Groups[0]; g.Lag == nil || *g.Lag != 7 || g.Topics["T"].Generation != 1 || g.State != model.StateStable {
		t.Fatalf("list: %+v", g)
	}
}
