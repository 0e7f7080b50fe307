package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/model"
)

// The delays of the end-to-end autoscale test: short, but far enough apart that each rule's
// moment can be told from the next one's.
const (
	e2eExpandWriteDelay = time.Second
	e2eMaxConfirmWait   = 5 * time.Second
	e2eShrinkStableFor  = time.Second
	e2eShrinkReadDelay  = 2 * time.Second
	// e2eSlop covers polling and the HTTP round trips around a moment.
	e2eSlop = 300 * time.Millisecond
)

// scaledView is GET /v1/topics/{topic} as the test reads it.
type scaledView struct {
	Brokers []struct {
		Name        string
		ReadQueues  int
		WriteQueues int
	}
	Autoscaling *struct {
		Target  int
		Pending *struct {
			Phase       string
			Wait        string
			Unconfirmed []string
			Checks      int
			Blockers    []struct {
				Broker string
				Queue  int
				Group  string
				Behind int64
				Reason string
			}
		}
	}
}

// member is a consumer that heartbeats every 200 ms and reports the generations it got in
// the previous answer as applied, as a real consumer does once it has switched its queues.
type member struct {
	cid  string
	url  *atomic.Pointer[string]
	stop func()
}

func startMember(t *testing.T, url *atomic.Pointer[string], group, cid string) *member {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	m := &member{cid: cid, url: url}
	wg.Go(func() {
		applied := map[string]int64{}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			body, _ := json.Marshal(map[string]any{"cid": cid, "topics": []string{"T"}, "generations": applied})
			if resp, err := http.Post(*url.Load()+"/v1/groups/"+group+"/heartbeat", "application/json", bytes.NewReader(body)); err == nil {
				var a assignment
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&a) == nil {
					applied = a.Generations
				}
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	m.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(m.stop)
	return m
}

func (d *daemon) view() scaledView {
	d.t.Helper()
	var v scaledView
	d.must(http.StatusOK, "GET", "/v1/topics/T", "", &v)
	if len(v.Brokers) != 1 || v.Autoscaling == nil {
		d.t.Fatalf("GET /v1/topics/T: %+v", v)
	}
	return v
}

// await polls GET /v1/topics/T until cond holds, and returns when it first did.
func (d *daemon) await(what string, within time.Duration, cond func(scaledView) bool) (scaledView, time.Time) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := d.view()
		if cond(v) {
			return v, time.Now()
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: not within %v; last seen %+v %+v", what, within, v.Brokers, v.Autoscaling.Pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitMember polls GET /v1/groups/{group} until cid is among its live members.
func (d *daemon) awaitMember(group, cid string, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var g model.GroupStatus
		d.must(http.StatusOK, "GET", "/v1/groups/"+group, "", &g)
		for _, m := range g.Members {
			if m.CID == cid {
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s is not a member of %s within %v: %+v", cid, group, within, g.Members)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counts(read, write int) func(scaledView) bool {
	return func(v scaledView) bool { return v.Brokers[0].ReadQueues == read && v.Brokers[0].WriteQueues == write }
}

// offsets reports queues 1 and 2 of broker-a: the broker's max offsets, then group g's
// committed offsets, last written an hour ago.
func (d *daemon) offsets(committed int64) {
	d.t.Helper()
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	var broker, group []string
	for _, q := range []int{1, 2} {
		broker = append(broker, fmt.Sprintf(`{"brokerName":"broker-a","queueId":%d,"max":100,"lastWrite":%q}`, q, old))
		group = append(group, fmt.Sprintf(`{"brokerName":"broker-a","queueId":%d,"committed":%d}`, q, committed))
	}
	d.must(http.StatusOK, "POST", "/v1/topics/T/offsets", `{"offsets":[`+strings.Join(broker, ",")+`]}`, nil)
	d.must(http.StatusOK, "POST", "/v1/topics/T/offsets", `{"group":"g","offsets":[`+strings.Join(group, ",")+`]}`, nil)
}

func TestServeAutoscales(t *testing.T) {
	data, plugins := t.TempDir(), wasmbuild.BuiltinPlugins(t)
	d := startDaemon(t, data, plugins)
	var url atomic.Pointer[string]
	url.Store(&d.url)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", fmt.Sprintf(`{"brokers":[{"name":"broker-a","readQueues":1,"writeQueues":1}],
		"autoscale":{"enabled":true,"min":1,"max":64,"expandWriteDelay":%q,"maxConfirmWait":%q,"shrinkReadDelay":%q,"shrinkStableFor":%q}}`,
		e2eExpandWriteDelay, e2eMaxConfirmWait, e2eShrinkReadDelay, e2eShrinkStableFor), nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	d.view() // 1/1, nothing pending

	// Three members join: read rises at once, write follows expandWriteDelay later, once
	// every member has applied the generation with the new queues (before maxConfirmWait).
	joined := time.Now()
	members := map[string]*member{}
	for _, cid := range []string{"c1", "c2", "c3"} {
		members[cid] = startMember(t, &url, "g", cid)
	}
	v, readUp := d.await("read rises at once", time.Second, counts(3, 1))
	if p := v.Autoscaling.Pending; p == nil || p.Phase != "raise-write" {
		t.Fatalf("pending after the read raise: %+v", p)
	}
	_, writeUp := d.await("write follows", e2eMaxConfirmWait+time.Second, counts(3, 3))
	if gap := writeUp.Sub(readUp); gap < e2eExpandWriteDelay-e2eSlop || gap > e2eMaxConfirmWait-e2eSlop {
		t.Fatalf("write rose %v after read (joined %v before); want expandWriteDelay %v, and before maxConfirmWait %v",
			gap, readUp.Sub(joined), e2eExpandWriteDelay, e2eMaxConfirmWait)
	}
	if v := d.view(); v.Autoscaling.Pending != nil || v.Autoscaling.Target != 3 {
		t.Fatalf("after the expansion: %+v", v.Autoscaling)
	}

	// Two leave: write drops after shrinkStableFor; read waits shrinkReadDelay more, and for
	// the drain.
	for _, cid := range []string{"c2", "c3"} {
		members[cid].stop()
		d.must(http.StatusOK, "POST", "/v1/groups/g/leave", fmt.Sprintf(`{"cid":%q}`, cid), nil)
	}
	left := time.Now()
	_, writeDown := d.await("write drops", e2eShrinkStableFor+2*time.Second, counts(3, 1))
	if gap := writeDown.Sub(left); gap < e2eShrinkStableFor-e2eSlop {
		t.Fatalf("write dropped %v after the members left; want shrinkStableFor %v", gap, e2eShrinkStableFor)
	}
	// Queues 1 and 2 still hold 50 messages g has not consumed: the check fails, visibly.
	d.offsets(50)
	v, checked := d.await("a failed drain check", e2eShrinkReadDelay+2*time.Second, func(v scaledView) bool {
		return v.Autoscaling.Pending != nil && v.Autoscaling.Pending.Checks > 0
	})
	if gap := checked.Sub(writeDown); gap < e2eShrinkReadDelay-e2eSlop {
		t.Fatalf("the first drain check came %v after the write drop; want shrinkReadDelay %v", gap, e2eShrinkReadDelay)
	}
	p := v.Autoscaling.Pending
	if v.Brokers[0].ReadQueues != 3 || p.Phase != "lower-read" || len(p.Blockers) != 2 ||
		p.Blockers[0].Queue != 1 || p.Blockers[0].Group != "g" || p.Blockers[0].Behind != 50 || !strings.Contains(p.Wait, "2 queues not drained") {
		t.Fatalf("blocked read drop: %+v %+v", v.Brokers, p)
	}

	// kill -9 while the read drop waits: it resumes after the restart.
	d.cmd.Process.Kill()
	<-d.exited
	d = startDaemon(t, data, plugins)
	url.Store(&d.url)
	if v := d.view(); v.Brokers[0].ReadQueues != 3 || v.Brokers[0].WriteQueues != 1 || v.Autoscaling.Pending == nil ||
		v.Autoscaling.Pending.Phase != "lower-read" {
		t.Fatalf("after kill -9: %+v %+v", v.Brokers, v.Autoscaling.Pending)
	}
	// Consumed to the end: read drops at the next check (max offsets do not survive a
	// restart, so they are reported again).
	d.offsets(100)
	reported := time.Now()
	_, readDown := d.await("read drops once drained", e2eShrinkReadDelay+2*time.Second, counts(1, 1))
	if gap := readDown.Sub(reported); gap > e2eShrinkReadDelay+e2eSlop {
		t.Fatalf("read dropped %v after the drain was reported; the next check is at most shrinkReadDelay %v away", gap, e2eShrinkReadDelay)
	}
	if v := d.view(); v.Autoscaling.Pending != nil || v.Autoscaling.Target != 1 {
		t.Fatalf("after the shrink: %+v", v.Autoscaling)
	}
	// c1 now owns the one queue left, from the generation that follows the read drop. Members
	// are not kept across a restart: c1 is one again at its first heartbeat to this daemon (one
	// every 200 ms), which the read drop can come before.
	d.awaitMember("g", "c1", 5*time.Second)
	a := d.poll("g", "c1", "T", 0)
	if len(a.Assignment["T"]) != 1 {
		a = d.poll("g", "c1", "T", a.Generations["T"])
	}
	if got := ids(a.Assignment["T"]); len(got) != 1 || got[0] != 0 {
		t.Fatalf("c1 has %v after the shrink", got)
	}
	_, metrics := d.raw("GET", "/metrics", "")
	for _, want := range []string{
		`allocd_autoscale_steps_total{direction="down",kind="set-read",topic="T"} 1`,
		`allocd_autoscale_pending{topic="T"} 0`,
	} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if log := d.stderr.String(); !strings.Contains(log, `"event":"step"`) || !strings.Contains(log, "autoscale step: set read of broker-a 3 -> 1") {
		t.Errorf("no step log line in:\n%s", log)
	}
}
