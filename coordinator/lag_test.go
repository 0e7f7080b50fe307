package coordinator_test

import (
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/model"
)

// The lag the group status and list show is what the owners report in their heartbeats; a
// report of a queue the member does not own is ignored, and an unknown offset gives no lag.
func TestLagFromHeartbeats(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 4)
	e.group("g", "averagely")
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	if s := e.status("g"); s.State != model.StateStable || s.Topics["T"].Lag != nil || s.Topics["T"].Offsets != nil {
		t.Fatalf("before any report: state %q, lag %v, offsets %v; want stable and no lag", s.State, s.Topics["T"].Lag, s.Topics["T"].Offsets)
	}
	report := func(cid string, offs ...coordinator.QueueOffset) {
		t.Helper()
		if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: cid, Topics: []string{"T"}, Offsets: map[string][]coordinator.QueueOffset{"T": offs}}); err != nil {
			t.Fatal(err)
		}
	}
	q := func(id int32, committed, max int64) coordinator.QueueOffset {
		return coordinator.QueueOffset{BrokerName: "broker-a", QueueID: id, Committed: committed, Max: max}
	}
	// averagely: c1 owns queues 0 and 1, c2 owns 2 and 3.
	report("c1", q(0, 10, 25), q(1, 5, -1), q(2, 0, 1000))
	report("c2", q(2, 7, 7), q(3, 1, 4))
	s := e.status("g").Topics["T"]
	if s.Lag == nil || *s.Lag != 15+0+3 {
		t.Fatalf("lag %v, want 18 (queue 0: 15, queue 2: 0, queue 3: 3; queue 1 unknown; c1's report of queue 2 ignored)", s.Lag)
	}
	if len(s.Offsets) != 4 || s.Offsets[1].Lag != nil || s.Offsets[2].Member != "c2" || s.Offsets[2].Committed != 7 {
		t.Fatalf("offsets %+v", s.Offsets)
	}
	list := e.c.Groups()
	if len(list) != 1 || list[0].Lag == nil || *list[0].Lag != 18 || list[0].Topics["T"].Generation != 1 || list[0].State != model.StateStable {
		t.Fatalf("group list %+v, want lag 18, generation 1, stable", list)
	}
	// c2 leaves: c1 owns every queue; c2's reports go with the queues c1 now owns but has not
	// reported, as the generation they came from ends.
	if _, err := e.c.Leave("g", "c2"); err != nil {
		t.Fatal(err)
	}
	if st := e.c.Groups()[0].State; st != model.StateRebalancing {
		t.Fatalf("state %q right after a leave, want rebalancing", st)
	}
	e.advance(time.Second)
	report("c1", q(3, 4, 4))
	if s := e.status("g").Topics["T"]; s.Lag == nil || *s.Lag != 15+0 || s.Offsets[3].Member != "c1" {
		t.Fatalf("after c2 left: lag %v offsets %+v; want 15 with c1's report of queue 3", s.Lag, s.Offsets)
	}
}
