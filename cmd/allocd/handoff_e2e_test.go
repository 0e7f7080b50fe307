package main_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/model"
)

// handoffGroup declares topic T of n queues on two brokers and group g bound to averagely in
// the given handoff mode, and returns the queues.
func handoffGroup(tb testing.TB, c *client.Client, mode client.HandoffMode, n int) []abi.Queue {
	tb.Helper()
	ctx := context.Background()
	per := n / 2
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: per, WriteQueues: per}, {Name: "broker-b", ReadQueues: per, WriteQueues: per}}); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.PutGroup(ctx, "g", client.Binding{Strategy: "averagely", Handoff: mode}); err != nil {
		tb.Fatal(err)
	}
	var all []abi.Queue
	for _, b := range []string{"broker-a", "broker-b"} {
		for i := range per {
			all = append(all, abi.Queue{Topic: "T", BrokerName: b, QueueID: int32(i)})
		}
	}
	return all
}

// waitStable waits until the generation in force hands out every queue to exactly the live
// members, holds nothing back, and every live member that is not stuck has applied it.
func waitStable(tb testing.TB, c *client.Client, queues int, live ...*simMember) int64 {
	tb.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		st, err := c.GetGroup(context.Background(), "g")
		if err == nil {
			ts := st.Topics["T"]
			n, ok := 0, !ts.Pending && len(ts.Handoffs) == 0 && ts.Generation > 0 && len(ts.Assignment) == len(live)
			for _, qs := range ts.Assignment {
				n += len(qs)
			}
			for _, m := range live {
				if _, in := ts.Assignment[m.cid]; !in || !m.stuck.Load() && m.appliedGen() != ts.Generation {
					ok = false
				}
			}
			if ok && n == queues {
				return ts.Generation
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the group did not settle: %+v %v", st.Topics["T"], err)
		}
		time.Sleep(20 * time.Millisecond) // polling the API for a state, not waiting for a timer
	}
}

// readHistory reads every retained generation of g/T, oldest first.
func readHistory(tb testing.TB, c *client.Client) []model.HistoryEntry {
	tb.Helper()
	var all []model.HistoryEntry
	before := int64(0)
	for {
		h, err := c.History(context.Background(), "g", "T", 100, before)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, h.Entries...)
		if h.Next == 0 {
			break
		}
		before = h.Next
	}
	slices.Reverse(all)
	return all
}

// removals lists the members the daemon removed (expired, or for not confirming in time), each
// with the first generation published after its removal, as the history says.
func removals(hist []model.HistoryEntry) []removal {
	var out []removal
	seen := map[string]bool{} // a removal shows in a handoff generation, then in the recomputation
	for _, e := range hist {
		ids := slices.Concat(e.Trigger.Removed, e.Trigger.Expired)
		for _, r := range e.Trigger.Released {
			if r.Reason == model.ReleaseRevokeTimeout || r.Reason == model.ReleaseExpired {
				ids = append(ids, r.Member)
			}
		}
		for _, id := range ids {
			if !seen[id] {
				out = append(out, removal{id, e.Generation})
			}
			seen[id] = true
		}
		for _, id := range e.Trigger.Joined {
			seen[id] = false // a new session, which may be lost again
		}
	}
	return out
}

func TestHandoffCooperativeKeepsTheInvariant(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	const nq = 64
	c := client.New(d.url)
	all := handoffGroup(t, c, client.HandoffCooperative, nq)
	s := newSim(t, d.url, "g", "T", 300*time.Millisecond)
	ms := map[string]*simMember{}
	var live []*simMember
	join := func(cid string) {
		ms[cid] = s.join(cid, 300*time.Millisecond, uint64(len(ms)+1))
		live = append(live, ms[cid])
	}
	drop := func(cid string) {
		live = slices.DeleteFunc(live, func(m *simMember) bool { return m.cid == cid })
	}
	for i := 1; i <= 8; i++ {
		join(fmt.Sprintf("m%d", i))
	}
	waitStable(t, c, nq, live...)

	ms["m8"].leave() // a leave
	drop("m8")
	waitStable(t, c, nq, live...)
	ms["m7"].crash() // a session expiry
	drop("m7")
	waitStable(t, c, nq, live...)
	join("m9") // a join
	waitStable(t, c, nq, live...)
	// m3 stops confirming; m10's join takes queues from it: the revoke timeout removes m3, which
	// learns it from a refused heartbeat and joins again once its fence ends.
	ms["m3"].stuck.Store(true)
	join("m10")
	waitStable(t, c, nq, live...)
	final := waitStable(t, c, nq, live...)
	// The members keep running (the sim's cleanup stops them): stopped, they would expire and
	// add generations while the history is read back.

	events := s.log()
	hist := readHistory(t, c)
	rm := removals(hist)
	if !slices.ContainsFunc(rm, func(r removal) bool { return r.member == "m3" }) {
		t.Fatalf("m3 was not removed for not confirming; removals %v", rm)
	}
	r := replay(events, rm, all, events[0].at)
	if r.overlaps != 0 {
		t.Fatalf("cooperative handoff: %d instants with a queue held twice, such as %v", r.overlaps, r.examples)
	}
	t.Logf("%d events, %d generations; longest without an owner: %v (%s)", len(events), len(hist), r.maxNoOwner, r.noOwnerAt)

	checkHistory(t, d, hist, events, final, all)
	checkHistoryCLI(t, d, hist)
	want := map[string][]string{}
	for _, e := range hist {
		add := func(k string, ids []string) { want[k] = append(want[k], ids...) }
		add("joined", e.Trigger.Joined)
		add("left", e.Trigger.Left)
		add("expired", e.Trigger.Expired)
		add("removed", e.Trigger.Removed)
		for _, rl := range e.Trigger.Released {
			add("released "+rl.Reason, []string{rl.Member})
		}
	}
	for k, ids := range map[string][]string{
		"joined": {"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"}, "left": {"m8"}, "expired": {"m7"},
		"removed": {"m3"}, "released revokeTimeout": {"m3"}, "released confirmed": {"m1"},
	} {
		for _, id := range ids {
			if !slices.Contains(want[k], id) {
				t.Errorf("no generation's trigger says %s %s (it says %v)", id, k, want[k])
			}
		}
	}
}

// checkHistory replays the history's moves and compares them with every answer the members
// received, and each queue's explain with the history.
func checkHistory(t *testing.T, d *daemon, hist []model.HistoryEntry, events []simEvent, final int64, all []abi.Queue) {
	t.Helper()
	if len(hist) == 0 || hist[0].Generation != 1 || hist[len(hist)-1].Generation != final {
		t.Fatalf("history holds %d entries, want generations 1..%d", len(hist), final)
	}
	owner := map[abi.Queue]string{}
	told := map[int64]map[string][]abi.Queue{} // generation -> member -> queues, replayed
	for i, e := range hist {
		if e.Generation != int64(i+1) {
			t.Fatalf("history skips from %d to %d", i, e.Generation)
		}
		if e.Trigger.Causes == nil || e.At.IsZero() || e.Plugin != "averagely" || e.PluginVersion == "" {
			t.Errorf("generation %d lacks a trigger, time or plugin: %+v", e.Generation, e)
		}
		for _, m := range e.Moves {
			if owner[m.Queue] != m.From {
				t.Fatalf("generation %d moves %s from %q, but the history gave it to %q", e.Generation, m.Queue, m.From, owner[m.Queue])
			}
			owner[m.Queue] = m.To
		}
		told[e.Generation] = map[string][]abi.Queue{}
		for _, q := range all {
			if o := owner[q]; o != "" {
				told[e.Generation][o] = append(told[e.Generation][o], q)
			}
		}
	}
	checked := 0
	for _, e := range events {
		if e.kind != evTold {
			continue
		}
		got, want := slices.Clone(e.queues), told[e.gen][e.member]
		slices.SortFunc(got, abi.CompareQueues)
		if !slices.Equal(got, want) {
			t.Fatalf("%s was told %v in generation %d; the history says %v", e.member, got, e.gen, want)
		}
		checked++
	}
	t.Logf("%d answers match the history", checked)

	var st client.GroupStatus
	d.must(http.StatusOK, "GET", "/v1/groups/g", "", &st)
	for _, q := range all {
		var ex model.Explanation
		d.must(http.StatusOK, "GET", "/v1/groups/g/explain?"+url.Values{"topic": {"T"}, "brokerName": {q.BrokerName}, "queueId": {fmt.Sprint(q.QueueID)}}.Encode(), "", &ex)
		var want []model.Move
		var gens []int64
		for _, e := range hist {
			for _, m := range e.Moves {
				if m.Queue == q {
					want = append(want, m)
					gens = append(gens, e.Generation)
				}
			}
		}
		if len(ex.Changes) != len(want) {
			t.Fatalf("explain of %s tells %d changes, the history %d", q, len(ex.Changes), len(want))
		}
		for i, ch := range ex.Changes {
			if ch.Generation != gens[i] || ch.From != want[i].From || ch.To != want[i].To || ch.Summary == "" {
				t.Fatalf("explain of %s, change %d: %+v; history: generation %d %+v", q, i, ch, gens[i], want[i])
			}
		}
		if !slices.Contains(st.Topics["T"].Assignment[ex.Owner], q) {
			t.Fatalf("explain says %s owns %s; the group's status disagrees", ex.Owner, q)
		}
	}
}

// The same kind of run in eager mode: members told at once apply later, and the checker sees
// two members holding the same queues.
func TestHandoffEagerTripsTheChecker(t *testing.T) {
	d := startDaemon(t, t.TempDir(), wasmbuild.BuiltinPlugins(t))
	const nq = 64
	c := client.New(d.url)
	all := handoffGroup(t, c, client.HandoffEager, nq)
	s := newSim(t, d.url, "g", "T", 300*time.Millisecond)
	var live []*simMember
	for i := 1; i <= 8; i++ {
		live = append(live, s.join(fmt.Sprintf("m%d", i), 300*time.Millisecond, uint64(i)))
		waitStable(t, c, nq, live...)
	}
	final := waitStable(t, c, nq, live...)
	// The members keep running (the sim's cleanup stops them): stopped, they would expire and
	// add generations while the history is read back.
	events := s.log()
	r := replay(events, removals(readHistory(t, c)), all, events[0].at)
	if r.overlaps == 0 || r.doubleQS == 0 {
		t.Fatalf("eager handoff with apply delays: the checker found no overlap (%d events)", len(events))
	}
	t.Logf("eager: %d instants with a queue held twice (%.2f queue-seconds), such as %v", r.overlaps, r.doubleQS, r.examples[0])
	hist := readHistory(t, c)
	checkHistory(t, d, hist, events, final, all)
	for _, e := range hist {
		if e.Handoff != model.HandoffEager || len(e.Pending) != 0 {
			t.Fatalf("eager generation %d: %+v", e.Generation, e)
		}
	}
}

// checkHistoryCLI checks the history's errors, its metric, and the history and explain
// subcommands against the API's answers.
func checkHistoryCLI(t *testing.T, d *daemon, hist []model.HistoryEntry) {
	t.Helper()
	for path, want := range map[string]int{
		"/v1/groups/g/history":                                       http.StatusBadRequest,
		"/v1/groups/g/history?topic=T&limit=0":                       http.StatusBadRequest,
		"/v1/groups/nope/history?topic=T":                            http.StatusNotFound,
		"/v1/groups/g/explain?topic=T&brokerName=broker-a":           http.StatusBadRequest,
		"/v1/groups/g/explain?topic=U&brokerName=broker-a&queueId=0": http.StatusNotFound,
	} {
		if code, b := d.raw("GET", path, ""); code != want || !strings.Contains(string(b), `"error"`) {
			t.Errorf("GET %s: %d %s, want %d", path, code, b, want)
		}
	}
	if _, b := d.raw("GET", "/metrics", ""); !strings.Contains(string(b), `allocd_rebalance_moved_queues_count{group="g"} `+fmt.Sprint(len(hist))) ||
		!strings.Contains(string(b), `allocd_handoff_revoke_timeouts_total{group="g"} 1`) {
		t.Errorf("metrics lack the moved-queues histogram or the revoke timeouts of g")
	}
	run := func(args ...string) string {
		out, err := exec.Command(wasmbuild.Allocd(t), append(args, "--addr", d.url)...).CombinedOutput()
		if err != nil {
			t.Fatalf("allocd %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("history", "--group", "g", "--topic", "T", "--limit", "1000")
	if !strings.HasPrefix(out, "GEN") || !strings.Contains(out, "m3 removed") || !strings.Contains(out, "m8 left") ||
		strings.Count(out, "\n") != len(hist)+1 {
		t.Errorf("allocd history printed:\n%s", out)
	}
	out = run("explain", "--group", "g", "--topic", "T", "--broker", "broker-a", "--queue", "0")
	if !strings.Contains(out, "queue MessageQueue [topic=T, brokerName=broker-a, queueId=0] of group g: owner") || !strings.Contains(out, "first generation") {
		t.Errorf("allocd explain printed:\n%s", out)
	}
	if out, err := exec.Command(wasmbuild.Allocd(t), "explain", "--group", "g", "--topic", "T").CombinedOutput(); err == nil || !strings.Contains(string(out), "--broker and --queue are required") {
		t.Errorf("allocd explain without a queue: %v %s", err, out)
	}
}
