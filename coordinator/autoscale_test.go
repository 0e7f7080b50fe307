package coordinator_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/store"
)

// The seed's numbers: read at once and write 10 s later on growth; write 60 s after the
// target fell, read 5 min after the write on shrink.
func seedPolicy() *autoscale.Policy {
	p := autoscale.DefaultPolicy()
	p.Enabled, p.Max = true, 64
	return &p
}

// scaledEnv is a coordinator with a metrics registry and topic T auto-scaled from read/write.
func scaledEnv(t *testing.T, read, write int, tweak ...func(*coordinator.Options)) (*env, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e := newEnv(t, append([]func(*coordinator.Options){func(o *coordinator.Options) { o.Metrics = reg }}, tweak...)...)
	if _, _, err := e.c.PutTopicAutoscale("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: read, WriteQueues: write}}, seedPolicy()); err != nil {
		t.Fatal(err)
	}
	e.group("g", "averagely")
	return e, reg
}

// counts returns broker-a's read and write counts as the topic record has them.
func (e *env) counts() (read, write int) {
	e.t.Helper()
	tp, err := e.c.Topic("T")
	if err != nil {
		e.t.Fatal(err)
	}
	return tp.Brokers[0].ReadQueues, tp.Brokers[0].WriteQueues
}

func (e *env) wantCounts(when string, read, write int) {
	e.t.Helper()
	if r, w := e.counts(); r != read || w != write {
		e.t.Fatalf("%s: read %d write %d, want read %d write %d\nstatus: %+v", when, r, w, read, write, e.scaling())
	}
}

// scaling returns T's autoscale status as GET /v1/topics/T shows it.
func (e *env) scaling() autoscale.Status {
	e.t.Helper()
	v, err := e.c.TopicView("T")
	if err != nil {
		e.t.Fatal(err)
	}
	if v.Autoscaling == nil {
		e.t.Fatal("no autoscale status")
	}
	if !slices.Equal(v.Autoscaling.Brokers, []autoscale.Broker{{Name: v.Brokers[0].Name, Read: v.Brokers[0].ReadQueues, Write: v.Brokers[0].WriteQueues}}) {
		e.t.Fatalf("the status's counts %+v differ from the record's %+v", v.Autoscaling.Brokers, v.Brokers)
	}
	return *v.Autoscaling
}

// applied has each member heartbeat twice: once to learn its assignment, once to say it
// applied it, as a consumer does.
func (e *env) applied(group string, cids ...string) {
	e.t.Helper()
	for _, cid := range cids {
		a := e.hb(group, cid, "T")
		if _, err := e.c.Heartbeat(group, coordinator.Heartbeat{CID: cid, Topics: []string{"T"}, Generations: a.Generations}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// drained reports queues of broker-a as fully consumed by group, last written 10 minutes ago.
func (e *env) drained(group string, committed int64, queues ...int32) {
	e.t.Helper()
	var offs []coordinator.QueueOffset
	for _, q := range queues {
		offs = append(offs, coordinator.QueueOffset{BrokerName: "broker-a", QueueID: q, Committed: committed, Max: 120, LastWrite: e.clock.Now().Add(-10 * time.Minute)})
	}
	if _, err := e.c.ReportOffsets("T", group, offs); err != nil {
		e.t.Fatal(err)
	}
}

// restartScaled restarts the coordinator with a fresh metrics registry (a registry refuses
// the same series twice).
func (e *env) restartScaled() {
	e.t.Helper()
	e.opts.Metrics = prometheus.NewRegistry()
	e.restart()
}

func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func TestAutoscaleGrowth(t *testing.T) {
	e, reg := scaledEnv(t, 1, 1)
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.hb("g", cid, "T")
	}
	e.tick()
	e.wantCounts("right after three members joined", 3, 1)
	s := e.scaling()
	if s.Pending == nil || s.Pending.Phase != autoscale.RaiseWrite || s.Pending.To != 3 ||
		!slices.Equal(s.Pending.Unconfirmed, []string{"g/c1", "g/c2", "g/c3"}) || s.Group != "g" || s.GroupSize != 3 {
		t.Fatalf("status after the read raise: %+v %+v", s, s.Pending)
	}
	raised := e.clock.Now()

	// The new read queues reach the members through a new generation; once every member has
	// applied it, the write step waits only for expandWriteDelay.
	e.advance(coordinator.DefaultDebounce)
	if n := e.gen("g", "T"); n != 1 {
		t.Fatalf("generation %d after the read raise", n)
	}
	if got := ids(e.hb("g", "c3", "T").Queues["T"]); !slices.Equal(got, []int32{2}) {
		t.Fatalf("c3 has %v over the 3 read queues", got)
	}
	e.applied("g", "c1", "c2")
	if s := e.scaling(); !slices.Equal(s.Pending.Unconfirmed, []string{"g/c3"}) || !strings.Contains(s.Pending.Wait, "g/c3") {
		t.Fatalf("waiting for c3: %+v", s.Pending)
	}
	e.applied("g", "c3")
	if s := e.scaling(); len(s.Pending.Unconfirmed) != 0 || !strings.Contains(s.Pending.Wait, "expandWriteDelay 10s") {
		t.Fatalf("all confirmed: %+v", s.Pending)
	}
	e.advance(raised.Add(10*time.Second - 100*time.Millisecond).Sub(e.clock.Now()))
	e.wantCounts("just before expandWriteDelay", 3, 1)
	e.advance(100 * time.Millisecond)
	e.wantCounts("at expandWriteDelay", 3, 3)
	if s := e.scaling(); s.Pending != nil {
		t.Fatalf("still pending after the write step: %+v", s.Pending)
	}
	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"allocd_autoscale_steps_total", map[string]string{"topic": "T", "kind": "set-read", "direction": "up"}, 1},
		{"allocd_autoscale_steps_total", map[string]string{"topic": "T", "kind": "set-write", "direction": "up"}, 1},
		{"allocd_autoscale_pending", map[string]string{"topic": "T"}, 0},
		{"allocd_autoscale_target", map[string]string{"topic": "T"}, 3},
	} {
		if got := metric(t, reg, m.name, m.labels); got != m.want {
			t.Errorf("%s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
	// The write step changed no assignment: no new generation.
	e.applied("g", "c1", "c2", "c3")
	e.advance(time.Second)
	if n := e.gen("g", "T"); n != 1 {
		t.Fatalf("generation %d after the write step, want 1", n)
	}
}

func TestAutoscaleGrowthWithoutConfirmations(t *testing.T) {
	e, _ := scaledEnv(t, 2, 2)
	for _, cid := range []string{"c1", "c2", "c3", "c4"} {
		e.hb("g", cid, "T")
	}
	e.tick()
	e.wantCounts("after four joined", 4, 2)
	// The members keep their sessions but never say they applied the new generation: the
	// write step waits for them until maxConfirmWait.
	for range 11 {
		e.advance(5 * time.Second)
		for _, cid := range []string{"c1", "c2", "c3", "c4"} {
			e.hb("g", cid, "T")
		}
		e.wantCounts("before maxConfirmWait", 4, 2)
	}
	if s := e.scaling(); len(s.Pending.Unconfirmed) != 4 || !strings.Contains(s.Pending.Wait, "maxConfirmWait 1m") {
		t.Fatalf("waiting for confirmations: %+v", s.Pending)
	}
	e.advance(5 * time.Second)
	e.wantCounts("at maxConfirmWait", 4, 4)
}

func TestAutoscaleShrink(t *testing.T) {
	e, reg := scaledEnv(t, 3, 3)
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.hb("g", cid, "T")
	}
	e.advance(time.Second)
	e.wantCounts("three members on three queues", 3, 3)
	e.c.Leave("g", "c2")
	e.c.Leave("g", "c3")
	e.tick()
	left := e.clock.Now()
	if s := e.scaling(); s.Target != 1 || s.Pending == nil || s.Pending.Phase != autoscale.LowerWrite || s.Pending.To != 1 {
		t.Fatalf("after two left: %+v", s)
	}
	keep := func(d time.Duration) { // c1 stays alive
		for d > 0 {
			step := min(d, 5*time.Second)
			e.advance(step)
			e.hb("g", "c1", "T")
			d -= step
		}
	}
	keep(left.Add(time.Minute - time.Second).Sub(e.clock.Now()))
	e.wantCounts("before shrinkStableFor", 3, 3)
	keep(time.Second)
	e.wantCounts("at shrinkStableFor", 3, 1)
	dropped := e.clock.Now()
	if s := e.scaling(); s.Pending == nil || s.Pending.Phase != autoscale.LowerRead || !s.Pending.Due.Equal(dropped.Add(5*time.Minute)) {
		t.Fatalf("after the write drop: %+v", s.Pending)
	}
	// Queues 1 and 2 are consumed to the end; the read count follows 5 min after the write.
	e.drained("g", 120, 1, 2)
	keep(5*time.Minute - time.Second)
	e.wantCounts("before shrinkReadDelay", 3, 1)
	keep(time.Second)
	e.wantCounts("at shrinkReadDelay", 1, 1)
	if got := metric(t, reg, "allocd_autoscale_steps_total", map[string]string{"kind": "set-read", "direction": "down"}); got != 1 {
		t.Fatalf("read drops counted: %v", got)
	}
	// The read drop is a new generation: c1 gets the one queue left.
	e.advance(time.Second)
	if got := ids(e.hb("g", "c1", "T").Queues["T"]); !slices.Equal(got, []int32{0}) {
		t.Fatalf("c1 has %v after the read drop", got)
	}
}

func TestAutoscaleShrinkWaitsForDrain(t *testing.T) {
	e, reg := scaledEnv(t, 3, 3)
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.hb("g", cid, "T")
	}
	e.advance(time.Second)
	e.c.Leave("g", "c2")
	e.c.Leave("g", "c3")
	e.tick()
	keep := func(d time.Duration) {
		for d > 0 {
			step := min(d, 5*time.Second)
			e.advance(step)
			e.hb("g", "c1", "T")
			d -= step
		}
	}
	keep(time.Minute)
	e.wantCounts("after the write drop", 3, 1)
	// Queue 2 is 20 messages behind for g; queue 1 was never reported.
	e.drained("g", 100, 2)
	keep(5 * time.Minute)
	e.wantCounts("a drain check that fails", 3, 1)
	s := e.scaling()
	if s.Pending == nil || s.Pending.Checks != 1 || s.Pending.BlockedQueues != 2 {
		t.Fatalf("after the failed check: %+v", s.Pending)
	}
	var behind *autoscale.Blocker
	for i, b := range s.Pending.Blockers {
		if b.Queue == 2 && b.Group == "g" {
			behind = &s.Pending.Blockers[i]
		}
	}
	if behind == nil || behind.Behind != 20 || !strings.Contains(s.Pending.Wait, "not drained") {
		t.Fatalf("blockers %+v, wait %q: want queue 2 of g 20 behind", s.Pending.Blockers, s.Pending.Wait)
	}
	if got := metric(t, reg, "allocd_autoscale_blocked_queues", map[string]string{"topic": "T"}); got != 2 {
		t.Fatalf("blocked queues metric %v", got)
	}
	// The member that owned them (c1 now owns every queue) reports them consumed in its
	// heartbeat; the read drop waits for the next check, shrinkReadDelay after the last.
	if _, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}, Offsets: map[string][]coordinator.QueueOffset{"T": {
		{BrokerName: "broker-a", QueueID: 1, Committed: 120, Max: 120, LastWrite: e.clock.Now().Add(-10 * time.Minute)},
		{BrokerName: "broker-a", QueueID: 2, Committed: 120, Max: 120, LastWrite: e.clock.Now().Add(-10 * time.Minute)},
	}}}); err != nil {
		t.Fatal(err)
	}
	e.wantCounts("drained, before the next check", 3, 1)
	keep(5 * time.Minute)
	e.wantCounts("at the next check", 1, 1)
}

func TestAutoscaleIgnoresBroadcastingAndDeletedGroups(t *testing.T) {
	e, _ := scaledEnv(t, 1, 1)
	if _, _, err := e.c.PutGroup("b", coordinator.Binding{Model: coordinator.Broadcasting}); err != nil {
		t.Fatal(err)
	}
	e.group("g2", "averagely")
	for _, cid := range []string{"b1", "b2", "b3", "b4", "b5"} {
		e.hb("b", cid, "T")
	}
	e.hb("g", "c1", "T")
	e.hb("g2", "d1", "T")
	e.hb("g2", "d2", "T")
	e.tick()
	e.wantCounts("broadcasting 5, clustering 1 and 2", 2, 1)
	if s := e.scaling(); s.Group != "g2" || s.GroupSize != 2 {
		t.Fatalf("sizing group: %+v", s)
	}
	// The largest group is deleted: the target falls to the other one.
	if err := e.c.DeleteGroup("g2"); err != nil {
		t.Fatal(err)
	}
	e.tick()
	if s := e.scaling(); s.Target != 1 || s.Group != "g" {
		t.Fatalf("after g2 was deleted: %+v", s)
	}
}

func TestAutoscaleResumesAfterRestart(t *testing.T) {
	e, _ := scaledEnv(t, 1, 1)
	for _, cid := range []string{"c1", "c2"} {
		e.hb("g", cid, "T")
	}
	e.tick()
	e.wantCounts("after two joined", 2, 1)
	raised := e.clock.Now()
	e.advance(time.Second)

	// Restart in the middle of the expansion: the write step is still pending after it, and
	// runs at its time once the members are back and confirm.
	e.restartScaled()
	e.c.PluginChanged("averagely", "v1")
	e.wantCounts("after the restart", 2, 1)
	if s := e.scaling(); s.Pending == nil || s.Pending.Phase != autoscale.RaiseWrite || !s.Pending.Since.Equal(raised) {
		t.Fatalf("pending step after the restart: %+v", s.Pending)
	}
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.advance(time.Second)
	e.applied("g", "c1", "c2")
	if s := e.scaling(); len(s.Pending.Unconfirmed) != 0 {
		t.Fatalf("unconfirmed after the members came back: %+v", s.Pending)
	}
	e.advance(raised.Add(10 * time.Second).Sub(e.clock.Now()))
	e.wantCounts("at expandWriteDelay after the restart", 2, 2)

	// Shrink to one member, then restart while the read drop waits; the step falls due while
	// the daemon is down and runs at the first tick, once the offsets are known again (max
	// offsets are not kept across a restart).
	e.hb("g", "c1", "T")
	e.c.Leave("g", "c2")
	for range 13 {
		e.advance(5 * time.Second)
		e.hb("g", "c1", "T")
	}
	e.wantCounts("after the write drop", 2, 1)
	e.drained("g", 120, 1)
	e.c.Close()
	e.clock.Advance(6 * time.Minute)
	e.restartScaled()
	e.c.PluginChanged("averagely", "v1")
	e.tick()
	if s := e.scaling(); s.Pending == nil || s.Pending.Phase != autoscale.LowerRead || s.Pending.BlockedQueues != 1 ||
		s.Pending.Blockers[0].Reason != "max offset unknown" {
		t.Fatalf("after a restart past the due time: %+v", s.Pending)
	}
	e.wantCounts("before the offsets are reported again", 2, 1)
	e.hb("g", "c1", "T")
	e.drained("g", 120, 1)
	e.advance(5*time.Minute + time.Second)
	e.wantCounts("after the next check", 1, 1)
}

// scaleFailStore fails topic and bucket writes on demand; it has no TopicTx, so the
// coordinator writes the record and the State one after the other.
type scaleFailStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
}

func (f *scaleFailStore) set(v bool) { f.mu.Lock(); f.fail = v; f.mu.Unlock() }

func (f *scaleFailStore) failing() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.fail }

func (f *scaleFailStore) PutTopic(t store.Topic) error {
	if f.failing() {
		return errors.New("write /data/allocd.db: no space left on device")
	}
	return f.Store.PutTopic(t)
}

func (f *scaleFailStore) Update(fn func(store.Tx) error) error {
	if f.failing() {
		return errors.New("write /data/allocd.db: no space left on device")
	}
	return f.Store.Update(fn)
}

func TestAutoscaleStoreFailureKeepsTheCounts(t *testing.T) {
	bolt, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	fs := &scaleFailStore{Store: bolt}
	e, reg := scaledEnv(t, 1, 1, func(o *coordinator.Options) { o.Store = fs })
	fs.set(true)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.tick()
	e.wantCounts("with the store failing", 1, 1)
	if s := e.scaling(); s.Pending != nil || s.Target != 1 {
		t.Fatalf("a refused step left a plan behind: %+v", s)
	}
	if got := metric(t, reg, "allocd_autoscale_store_failures_total", map[string]string{"topic": "T"}); got != 1 {
		t.Fatalf("store failures counted: %v", got)
	}
	fs.set(false)
	e.advance(2 * time.Second) // past the backoff
	e.wantCounts("after the store recovered", 2, 1)
	// Both writes reached the store: a restart finds them.
	e.restartScaled()
	e.wantCounts("after a restart", 2, 1)
	if s := e.scaling(); s.Pending == nil || s.Pending.Phase != autoscale.RaiseWrite {
		t.Fatalf("pending after the restart: %+v", s.Pending)
	}
}

func TestPutTopicAutoscale(t *testing.T) {
	e, _ := scaledEnv(t, 1, 1)
	e.hb("g", "c1", "T")
	e.hb("g", "c2", "T")
	e.tick()
	e.wantCounts("scaled", 2, 1)
	// The same declaration again (as --config does at every start) does not undo the scaling.
	tp, created, err := e.c.PutTopicAutoscale("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 1, WriteQueues: 1}}, seedPolicy())
	if err != nil || created || tp.Brokers[0].ReadQueues != 2 {
		t.Fatalf("declared again: %+v %v %v", tp, created, err)
	}
	// A new broker starts where it is declared and is scaled with the others.
	tp, _, err = e.c.PutTopicAutoscale("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 1, WriteQueues: 1}, {Name: "broker-b", ReadQueues: 1, WriteQueues: 0}}, seedPolicy())
	if err != nil || tp.Brokers[1].ReadQueues != 2 || tp.Brokers[1].WriteQueues != 0 {
		t.Fatalf("a broker added: %+v %v", tp, err)
	}
	for _, bad := range []struct {
		brokers []coordinator.Broker
		policy  func(*autoscale.Policy)
		want    string
	}{
		{nil, func(p *autoscale.Policy) { p.Max = 5000 }, "max 5000 out of range"},
		{nil, func(p *autoscale.Policy) { p.Min = 0 }, "min 0 out of range"},
		{nil, func(p *autoscale.Policy) { p.MaxConfirmWait = time.Second }, "maxConfirmWait 1s shorter than expandWriteDelay 10s"},
		{[]coordinator.Broker{{Name: "broker-a", ReadQueues: 1, WriteQueues: 2}}, nil, "writeQueues 2 above readQueues 1"},
	} {
		p := seedPolicy()
		if bad.policy != nil {
			bad.policy(p)
		}
		brokers := bad.brokers
		if brokers == nil {
			brokers = []coordinator.Broker{{Name: "broker-a", ReadQueues: 1, WriteQueues: 1}}
		}
		if _, _, err := e.c.PutTopicAutoscale("T", brokers, p); coordinator.KindOf(err) != coordinator.KindInvalid || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("PutTopicAutoscale: %v, want invalid with %q", err, bad.want)
		}
	}
	// Without a policy, the operator's counts apply and the status is gone.
	tp, _, err = e.c.PutTopic("T", []coordinator.Broker{{Name: "broker-a", ReadQueues: 8, WriteQueues: 8}})
	if err != nil || tp.Autoscale != nil || tp.Brokers[0].ReadQueues != 8 {
		t.Fatalf("policy removed: %+v %v", tp, err)
	}
	if v, _ := e.c.TopicView("T"); v.Autoscaling != nil {
		t.Fatalf("status of an unscaled topic: %+v", v.Autoscaling)
	}
	if _, err := e.c.ReportOffsets("T", "g", nil); coordinator.KindOf(err) != coordinator.KindConflict {
		t.Fatalf("offsets of an unscaled topic: %v", err)
	}
	e.restartScaled()
	if v, _ := e.c.TopicView("T"); v.Autoscaling != nil || v.Brokers[0].ReadQueues != 8 {
		t.Fatalf("after a restart: %+v", v)
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := coordinator.ParsePolicy([]byte(`{"enabled":true,"max":64,"shrinkReadDelay":"2s"}`))
	want := autoscale.DefaultPolicy()
	want.Enabled, want.Max, want.ShrinkReadDelay = true, 64, 2*time.Second
	if err != nil || p == nil || *p != want {
		t.Fatalf("ParsePolicy = %+v, %v; want %+v", p, err, want)
	}
	for _, raw := range []string{"", "null", " null "} {
		if p, err := coordinator.ParsePolicy([]byte(raw)); p != nil || err != nil {
			t.Errorf("ParsePolicy(%q) = %+v, %v", raw, p, err)
		}
	}
	for raw, msg := range map[string]string{
		`{"shrinkReadDelay":"soon"}`: `shrinkReadDelay "soon" is not a duration`,
		`{"shrinkReadDlay":"5m"}`:    `unknown field "shrinkReadDlay"`,
		`{"min":"1"}`:                `field "min": JSON string`,
		`"on"`:                       "JSON string where an object is wanted",
		`{"min":3,"max":2}`:          "max 2 below min 3",
		`{"shrinkReadDelay":"0s"}`:   "shrinkReadDelay 0s must be positive",
	} {
		_, err := coordinator.ParsePolicy([]byte(raw))
		if coordinator.KindOf(err) != coordinator.KindInvalid || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "json: ") {
			t.Errorf("ParsePolicy(%s) = %v, want invalid with %q", raw, err, msg)
		}
	}
}

func TestHeartbeatOffsetsChecked(t *testing.T) {
	e, _ := scaledEnv(t, 1, 1)
	for _, tc := range []struct {
		offs map[string][]coordinator.QueueOffset
		want string
	}{
		{map[string][]coordinator.QueueOffset{"a b": nil}, `topic name "a b"`},
		{map[string][]coordinator.QueueOffset{"T": {{BrokerName: "", QueueID: 1}}}, "offsets of topic T[0]: broker name"},
		{map[string][]coordinator.QueueOffset{"T": {{BrokerName: "b", QueueID: -1}}}, "queueId -1 is outside [0, 1024)"},
		{map[string][]coordinator.QueueOffset{"T": {{BrokerName: "b", Committed: -2, Max: 3}}}, "committed -2, max 3"},
	} {
		_, err := e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}, Offsets: tc.offs})
		if coordinator.KindOf(err) != coordinator.KindInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heartbeat with offsets %v: %v, want %q", tc.offs, err, tc.want)
		}
	}
	if _, err := e.c.ReportOffsets("T", "a b", nil); coordinator.KindOf(err) != coordinator.KindInvalid {
		t.Errorf("ReportOffsets with a bad group: %v", err)
	}
	if _, err := e.c.ReportOffsets("nosuch", "", nil); coordinator.KindOf(err) != coordinator.KindNotFound {
		t.Errorf("ReportOffsets of an unknown topic: %v", err)
	}
}
