package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/internal/etcdtest"
	"github.com/allocd/allocd/internal/wasmbuild"
)

// The high-availability tests run three real `allocd serve --etcd` replicas on a real etcd
// (internal/etcdtest), each on a fixed address so a client keeps its list across restarts, with
// a 2 s session TTL: a dead leader is replaced within about 2.5 s.

const haTTL = 2 * time.Second

type haCluster struct {
	t       *testing.T
	etcd    *etcdtest.Etcd
	prefix  string
	plugins string
	nodes   []*haNode
}

type haNode struct {
	addr, data string
	mu         sync.Mutex
	d          *daemon
}

func (n *haNode) url() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "http://" + n.addr
}

func (n *haNode) daemon() *daemon {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.d
}

// newHACluster starts etcd and n replicas, and waits until one leads.
func newHACluster(t *testing.T, n int) *haCluster {
	hc := &haCluster{t: t, etcd: etcdtest.Start(t), prefix: "/allocd-test/", plugins: wasmbuild.BuiltinPlugins(t)}
	for range n {
		hc.nodes = append(hc.nodes, &haNode{data: t.TempDir()})
	}
	var wg sync.WaitGroup
	for i := range hc.nodes {
		wg.Go(func() { hc.start(i) })
	}
	wg.Wait()
	if t.Failed() { // a replica did not start (its goroutine's Fatal ends only that goroutine)
		t.FailNow()
	}
	hc.waitLeader(-1, 90*time.Second) // each replica compiles its plugins first: seconds under -race and load
	for i := range hc.nodes {
		eventually(t, time.Minute, fmt.Sprintf("replica %d has loaded its plugins and knows the leader", i), func() bool {
			r := hc.role(i).Role
			return r == "leader" || r == "follower"
		})
	}
	return hc
}

// start runs replica i (again), and returns once it listens: the first time on a port the
// kernel picks as it binds (a port picked free beforehand can be taken by then), again on the
// same address.
func (hc *haCluster) start(i int) {
	n := hc.nodes[i]
	n.mu.Lock()
	addr := n.addr
	n.mu.Unlock()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	d := launchDaemon(hc.t, n.data, hc.plugins, "--listen", addr,
		"--etcd", strings.Join(hc.etcd.Endpoints(), ","), "--etcd-prefix", hc.prefix,
		"--etcd-session-ttl", haTTL.String(), "--etcd-timeout", "2s")
	n.mu.Lock()
	n.d = d
	n.addr = strings.TrimPrefix(d.url, "http://")
	n.mu.Unlock()
}

// kill sends sig to replica i; SIGKILL also waits for it to exit.
func (hc *haCluster) signal(i int, sig syscall.Signal) {
	d := hc.nodes[i].daemon()
	if err := d.cmd.Process.Signal(sig); err != nil {
		hc.t.Fatal(err)
	}
	if sig == syscall.SIGKILL {
		<-d.exited
	}
}

type readyz struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Leader string `json:"leader"`
	Term   string `json:"term"`
}

// role asks replica i's /readyz, with a short timeout (a paused replica does not answer).
func (hc *haCluster) role(i int) readyz {
	var r readyz
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(hc.nodes[i].url() + "/readyz")
	if err != nil {
		return readyz{Role: "unreachable"}
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&r)
	return r
}

// waitLeader waits until a replica other than not reports itself leader, and returns it.
func (hc *haCluster) waitLeader(not int, within time.Duration) int {
	hc.t.Helper()
	deadline := time.Now().Add(within)
	for {
		for i := range hc.nodes {
			if i != not && hc.role(i).Role == "leader" {
				return i
			}
		}
		if time.Now().After(deadline) {
			var roles []string
			for i := range hc.nodes {
				roles = append(roles, fmt.Sprintf("%d: %+v", i, hc.role(i)))
			}
			hc.t.Fatalf("no leader (other than %d) within %v: %s", not, within, strings.Join(roles, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (hc *haCluster) urls() string {
	var us []string
	for _, n := range hc.nodes {
		us = append(us, n.url())
	}
	return strings.Join(us, ",")
}

// client is a Go client of all the replicas.
func (hc *haCluster) client() *client.Client {
	return client.New(hc.urls(), client.WithTimeout(2*time.Second))
}

// setup declares topic T (8 queues), group g (averagely) and the orderly group qg.
func (hc *haCluster) setup() {
	ctx := context.Background()
	c := hc.client()
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 8, WriteQueues: 8}}); err != nil {
		hc.t.Fatal(err)
	}
	for name, b := range map[string]client.Binding{"g": {Strategy: "averagely"}, "qg": {Strategy: "averagely", Orderly: true}} {
		if _, err := c.PutGroup(ctx, name, b); err != nil {
			hc.t.Fatal(err)
		}
	}
}

// consumers starts consumers of g through the client of every replica; errors reach errs.
func (hc *haCluster) consumers(errs chan<- error, cids ...string) []*client.Consumer {
	var out []*client.Consumer
	for _, cid := range cids {
		cons := hc.client().NewConsumer("g", cid, []string{"T"}, client.ConsumerOptions{
			HeartbeatInterval: haTTL / 8, RetryMin: 50 * time.Millisecond, PollWait: 3 * time.Second,
			OnError: func(err error) {
				select {
				case errs <- fmt.Errorf("%s: %w", cid, err):
				default:
				}
			},
		})
		if err := cons.Start(context.Background()); err != nil {
			hc.t.Fatal(err)
		}
		hc.t.Cleanup(func() { cons.Close(context.Background()) })
		out = append(out, cons)
	}
	return out
}

// settled waits until every consumer holds an assignment of one generation covering all 8
// queues, some of them each: g's averagely gives each of up to 8 members some, so an empty
// list is one of a generation computed before that consumer joined, about to be replaced (all
// three consumers at a generation that gave c1 all 8 once passed for settled, and the next
// generation then read as a failover moving queues).
func settled(t *testing.T, cons []*client.Consumer, within time.Duration) (gen int64, queues map[string][]int32) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		queues = map[string][]int32{}
		gen, total, same := int64(-1), 0, true
		for _, c := range cons {
			a, ok := c.Current("T")
			if !ok || len(a.Queues) == 0 {
				same = false
				break
			}
			if gen >= 0 && a.Generation != gen {
				same = false
			}
			gen = a.Generation
			queues[c.CID()] = ids(a.Queues)
			total += len(a.Queues)
		}
		if same && total == 8 {
			return gen, queues
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumers did not settle on one generation of 8 queues within %v: %v", within, queues)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startHAGroup starts three replicas with T, g and qg declared, and consumers c1..c3 of g
// settled on one generation.
func startHAGroup(t *testing.T) (hc *haCluster, errs chan error, cons []*client.Consumer, gen int64, queues map[string][]int32) {
	hc = newHACluster(t, 3)
	hc.setup()
	errs = make(chan error, 1000)
	cons = hc.consumers(errs, "c1", "c2", "c3")
	gen, queues = settled(t, cons, 20*time.Second)
	return hc, errs, cons, gen, queues
}

// kill -9 the leader under heartbeat and lock traffic: a follower takes over within about the
// TTL, nothing acknowledged is lost (topics, groups, a granted lock lease and its token), and
// no consumer loses or changes its queues, since the membership did not change.
func TestHAKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and three replicas")
	}
	hc, errs, cons, gen, before := startHAGroup(t)

	// Lock traffic: qg's members hold and renew queue locks.
	ctx := context.Background()
	lc := hc.client()
	for _, cid := range []string{"c1", "c2"} {
		if _, err := lc.Heartbeat(ctx, "qg", client.Heartbeat{CID: cid, Topics: []string{"T"}}); err != nil {
			t.Fatal(err)
		}
	}
	stopBeats := (&lockCluster{t: t}).beater(lc, "c1", "qg")
	defer stopBeats()
	stopBeats2 := (&lockCluster{t: t}).beater(lc, "c2", "qg")
	defer stopBeats2()
	q0 := client.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 0}
	var held client.QueueLock
	holder, other := "", ""
	eventually(t, 20*time.Second, "c1 or c2 locks queue 0", func() bool {
		for _, cid := range []string{"c1", "c2"} {
			locked, _, err := lc.LockQueues(ctx, "qg", cid, []client.Queue{q0}, testLease)
			if err == nil && len(locked) == 1 {
				held, holder, other = locked[0], cid, map[string]string{"c1": "c2", "c2": "c1"}[cid]
				return true
			}
		}
		return false
	})

	old := hc.waitLeader(-1, time.Second)
	for len(errs) > 0 { // before the failover
		t.Logf("before the kill: %v", <-errs)
	}
	start := time.Now()
	hc.signal(old, syscall.SIGKILL)
	// The first heartbeat answered by the new leader.
	var leader int
	hb, _ := json.Marshal(map[string]any{"cid": "probe", "topics": []string{"T"}})
	for {
		leader = -1
		for i, n := range hc.nodes {
			if i == old {
				continue
			}
			resp, err := (&http.Client{Timeout: time.Second}).Post(n.url()+"/v1/groups/probe/heartbeat", "application/json", strings.NewReader(string(hb)))
			if err == nil {
				resp.Body.Close()
				// 404: the group does not exist, but a leader answered it, directly or through
				// a follower's proxy: the header names the replica that computed the answer.
				if resp.StatusCode == http.StatusNotFound {
					for j, m := range hc.nodes {
						if j != old && resp.Header.Get("X-Allocd-Leader") == m.url() {
							leader = j
						}
					}
				}
			}
		}
		if leader >= 0 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("no new leader answered a heartbeat within 15 s of the kill")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("kill -9 of the leader to the first heartbeat answered by the new one: %v", took)
	if took > 3*haTTL {
		t.Errorf("failover took %v, more than 3 TTLs", took)
	}

	// The lock granted before the kill still holds: the other member is refused, the holder
	// renews with its token, and a token granted now is above every one before.
	// (Members are known to the new leader once they heartbeat again: until then it answers 404.)
	var refused []client.QueueRefusal
	var err error
	eventually(t, 5*time.Second, other+"'s lock call answered by the new leader", func() bool {
		_, refused, err = lc.LockQueues(ctx, "qg", other, []client.Queue{q0}, testLease)
		return !client.IsNotFound(err)
	})
	if err != nil || len(refused) != 1 {
		t.Fatalf("%s asking for queue 0 held by %s after the failover: refused %v, %v", other, holder, refused, err)
	}
	var locked []client.QueueLock
	eventually(t, 5*time.Second, holder+"'s renewal answered by the new leader", func() bool {
		locked, _, err = lc.LockQueues(ctx, "qg", holder, []client.Queue{q0}, testLease)
		return !client.IsNotFound(err)
	})
	if err != nil || len(locked) != 1 || locked[0].Token != held.Token {
		t.Fatalf("the holder's renewal after the failover: %+v, %v; want token %d", locked, err, held.Token)
	}
	q1 := client.Queue{Topic: "T", BrokerName: "broker-a", QueueID: 1}
	eventually(t, 10*time.Second, "a new lock after the failover", func() bool {
		locked, _, err = lc.LockQueues(ctx, "qg", holder, []client.Queue{q1}, testLease)
		return err == nil && len(locked) == 1
	})
	if locked[0].Token <= held.Token {
		t.Fatalf("a token granted by the new leader, %d, is not above %d granted by the old one", locked[0].Token, held.Token)
	}

	// Past the restart grace (the session timeout), the consumers hold what they held.
	time.Sleep(e2eSession + time.Second)
	gen2, after := settled(t, cons, 10*time.Second)
	if gen2 != gen || !mapsEqual(before, after) {
		t.Fatalf("the failover moved queues: generation %d %v, then %d %v", gen, before, gen2, after)
	}
	select {
	case err := <-errs:
		t.Fatalf("a consumer was told of an error during the failover: %v", err)
	default:
	}
	topics, err := lc.ListTopics(ctx)
	if err != nil || len(topics) != 1 {
		t.Fatalf("topics after the failover: %v, %v", topics, err)
	}
	// The killed replica comes back as a follower.
	restarted := time.Now()
	hc.start(old)
	var last readyz
	eventually(t, time.Minute, "the restarted replica follows (see the last /readyz below)", func() bool {
		last = hc.role(old)
		if time.Since(restarted) > 50*time.Second {
			t.Logf("the restarted replica's /readyz: %+v, the leader %s", last, hc.nodes[leader].url())
		}
		return last.Role == "follower" && last.Leader == hc.nodes[leader].url()
	})
	t.Logf("the killed replica, restarted, follows after %v", time.Since(restarted))

	// /metrics: each replica its own role; the new leader won an election; the restarted one
	// counted time without a leader.
	metric := func(i int, series string) string {
		_, b := hc.nodes[i].daemon().raw("GET", "/metrics", "")
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, series+" "); ok {
				return v
			}
		}
		return ""
	}
	if v := metric(leader, `allocd_ha_role{role="leader"}`); v != "1" {
		t.Errorf("the leader's allocd_ha_role{role=\"leader\"} = %q", v)
	}
	if v := metric(leader, "allocd_ha_elections_won_total"); v != "1" {
		t.Errorf("the new leader's allocd_ha_elections_won_total = %q", v)
	}
	if v := metric(old, `allocd_ha_role{role="follower"}`); v != "1" {
		t.Errorf("the restarted replica's allocd_ha_role{role=\"follower\"} = %q", v)
	}
	if v := metric(old, "allocd_ha_without_leader_seconds_total"); v == "" || v == "0" {
		t.Errorf("the restarted replica's allocd_ha_without_leader_seconds_total = %q", v)
	}
	if v := metric(leader, "allocd_generation{group=\"g\",topic=\"T\"}"); v == "" {
		t.Error("the leader's /metrics lacks the coordinator's series")
	}

	// Each leader kept the plugin versions it serves in etcd (its plugins were loaded before it
	// won), so the kept versions are the new leader's; a follower's keep, refused by the fence,
	// is not reported as an error.
	var list struct{ Plugins []pluginState }
	hc.nodes[leader].daemon().must(http.StatusOK, "GET", "/v1/plugins", "", &list)
	kv, err := hc.etcd.Client(t).Get(ctx, hc.prefix+"plugins/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, e := range kv.Kvs {
		var v struct{ Hash string }
		json.Unmarshal(e.Value, &v)
		kept[strings.TrimPrefix(string(e.Key), hc.prefix+"plugins/")] = v.Hash
	}
	for _, p := range list.Plugins {
		if kept[p.Name] != p.ActiveHash {
			t.Errorf("plugin %s: etcd keeps version %q, the leader serves %q", p.Name, kept[p.Name], p.ActiveHash)
		}
	}
	for i, n := range hc.nodes {
		if log := n.daemon().stderr.String(); strings.Contains(log, "could not keep") {
			t.Errorf("replica %d reported a version it could not keep: %s", i, log)
		}
	}
}

func mapsEqual(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// etcdWatch records every change under a prefix, with its revision.
type etcdWatch struct {
	mu     sync.Mutex
	events []*clientv3.Event
}

func watchPrefix(t *testing.T, cli *clientv3.Client, prefix string) *etcdWatch {
	w := &etcdWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for wr := range wch {
			w.mu.Lock()
			w.events = append(w.events, wr.Events...)
			w.mu.Unlock()
		}
	}()
	return w
}

// allKept reports whether etcd under prefix holds a kept version of every plugin in the folder
// and no chunk that none of them names: whether a leader's keeping is done, its unused chunks
// removed.
func allKept(t *testing.T, cli *clientv3.Client, prefix, plugins string) bool {
	t.Helper()
	wasm, err := filepath.Glob(filepath.Join(plugins, "*.wasm"))
	if err != nil || len(wasm) == 0 {
		t.Fatalf("no plugins in %s: %v", plugins, err)
	}
	resp, err := cli.Get(context.Background(), prefix+"plugins/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != len(wasm) {
		return false
	}
	used := map[string]bool{}
	for _, kv := range resp.Kvs {
		var v struct{ Chunks []string }
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			t.Fatalf("kept version %s: %v", kv.Key, err)
		}
		for _, c := range v.Chunks {
			used[prefix+"chunks/"+c] = true
		}
	}
	chunks, err := cli.Get(context.Background(), prefix+"chunks/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(resp.Header.Revision))
	if err != nil || len(chunks.Kvs) != len(used) {
		return false
	}
	for _, kv := range chunks.Kvs {
		if !used[string(kv.Key)] {
			return false
		}
	}
	return true
}

func (w *etcdWatch) since(rev int64) []*clientv3.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*clientv3.Event
	for _, e := range w.events {
		if e.Kv.ModRevision > rev {
			out = append(out, e)
		}
	}
	return out
}

// SIGSTOP the leader for longer than its lease; another takes over; SIGCONT it: the old leader
// makes no write and serves nothing. To tell its writes from the new leader's, the new leader
// is paused in turn before the old one wakes: until the new leader's key goes (its lease runs
// out) no replica may write at all, so every state write the watch sees in that window would be
// the old leader's.
func TestHAPausedLeaderWakesFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and three replicas")
	}
	hc := newHACluster(t, 3)
	hc.setup()
	errs := make(chan error, 100)
	cons := hc.consumers(errs, "c1", "c2")
	settled(t, cons, 20*time.Second)
	cli := hc.etcd.Client(t)
	w := watchPrefix(t, cli, hc.prefix)

	old := hc.waitLeader(-1, time.Second)
	oldURL, oldTerm := hc.nodes[old].url(), hc.role(old).Term
	if oldTerm == "" {
		t.Fatal("the leader's /readyz names no term")
	}
	// A long-poll at the old leader, waiting when it is paused.
	type answer struct {
		code int
		term string
	}
	polled := make(chan answer, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(oldURL + "/v1/groups/g/assignment?cid=c1&topic=T&after=1000000&wait=20s")
		if err != nil {
			polled <- answer{code: -1}
			return
		}
		resp.Body.Close()
		polled <- answer{resp.StatusCode, resp.Header.Get("X-Allocd-Term")}
	}()
	time.Sleep(200 * time.Millisecond)
	hc.signal(old, syscall.SIGSTOP)
	stoppedOld := true
	defer func() {
		if stoppedOld {
			hc.signal(old, syscall.SIGCONT)
		}
	}()
	next := hc.waitLeader(old, 15*time.Second)
	time.Sleep(500 * time.Millisecond) // let it load and settle
	// A term starts by keeping the plugins it serves in etcd, beside the serving. When the
	// terms before did not finish that (a replica stopped or fenced mid-keep), the new leader
	// writes chunks of up to 512 KiB: one still on its way to etcd when the leader is paused
	// is applied after the pause, fenced by its key, which is still there. So the leader is
	// paused once its keeping is done: nothing of its own is left in flight.
	eventually(t, 20*time.Second, "the new leader has kept every plugin it serves", func() bool {
		return allKept(t, cli, hc.prefix, hc.plugins)
	})
	hc.signal(next, syscall.SIGSTOP)
	defer hc.signal(next, syscall.SIGCONT)
	// The new leader's key, which goes when its lease runs out.
	resp, err := cli.Get(context.Background(), hc.prefix+"leader/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("election keys: %v, %v", resp, err)
	}
	nextKey := string(resp.Kvs[0].Key)
	if string(resp.Kvs[0].Value) != hc.nodes[next].url() {
		t.Fatalf("the first election key %s is %s's, not the new leader's", nextKey, resp.Kvs[0].Value)
	}
	woke := resp.Header.Revision
	hc.signal(old, syscall.SIGCONT)
	stoppedOld = false

	// The old leader serves nothing of its old term: not its pending long-poll, not new calls
	// (an answer of a later term it may win is not stale).
	probe := &http.Client{Timeout: 500 * time.Millisecond}
	served, answered := 0, 0
	for range 10 {
		for _, path := range []string{"/v1/groups/g/heartbeat", "/v1/groups/qg/locks/queues"} {
			body := `{"cid":"c1","topics":["T"]}`
			if strings.Contains(path, "locks") {
				body = `{"cid":"c1","queues":[{"topic":"T","brokerName":"broker-a","queueId":0}],"lease":"10s"}`
			}
			if resp, err := probe.Post(oldURL+path, "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
				answered++
				if resp.Header.Get("X-Allocd-Term") == oldTerm {
					served++
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if served > 0 {
		t.Errorf("the woken old leader answered %d calls in its old term %s", served, oldTerm)
	}
	t.Logf("calls to the woken old leader: %d answered (none from its old term)", answered)
	select {
	case a := <-polled:
		if a.code == http.StatusOK || a.term == oldTerm {
			t.Errorf("the long-poll pending at the old leader answered %d (term %q) after it woke", a.code, a.term)
		}
	case <-time.After(5 * time.Second):
		t.Error("the long-poll pending at the old leader did not end within 5 s of waking")
	}

	// Until the paused new leader's key is gone, nobody may write: every state write is the
	// old leader's.
	var gone int64
	eventually(t, 15*time.Second, "the paused new leader's key expires", func() bool {
		for _, e := range w.since(woke) {
			if e.Type == clientv3.EventTypeDelete && string(e.Kv.Key) == nextKey {
				gone = e.Kv.ModRevision
				return true
			}
		}
		return false
	})
	writes := 0
	for _, e := range w.since(woke) {
		if e.Kv.ModRevision < gone && !strings.HasPrefix(string(e.Kv.Key), hc.prefix+"leader/") {
			t.Errorf("a write while only the woken old leader ran: %s %s at revision %d", e.Type, e.Kv.Key, e.Kv.ModRevision)
			writes++
		}
	}
	t.Logf("state writes between the old leader waking (rev %d) and the new leader's key expiring (rev %d): %d", woke, gone, writes)

	// Service resumes with a leader, the state intact.
	hc.signal(next, syscall.SIGCONT)
	hc.waitLeader(-1, 15*time.Second)
	eventually(t, 15*time.Second, "the groups are served again", func() bool {
		gs, err := hc.client().ListGroups(context.Background())
		return err == nil && len(gs) == 2
	})
}

// etcd stops for 10 s: the leader steps down (no replica answers as leader), consumers keep
// their last assignment, and service resumes when etcd is back with nothing lost and no queue
// moved.
func TestHAEtcdDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and three replicas")
	}
	hc, errs, cons, gen, before := startHAGroup(t)

	hc.etcd.Stop()
	eventually(t, 2*haTTL, "every replica steps down", func() bool {
		for i := range hc.nodes {
			if hc.role(i).Role == "leader" {
				return false
			}
		}
		return true
	})
	for i := range hc.nodes {
		if r := hc.role(i); r.Status != "no leader" && r.Role != "follower" {
			t.Errorf("replica %d with etcd down: %+v", i, r)
		}
	}
	time.Sleep(10*time.Second - 2*haTTL)
	for _, c := range cons {
		if a, ok := c.Current("T"); !ok || a.Generation != gen || !slices.Equal(ids(a.Queues), before[c.CID()]) {
			t.Errorf("%s with etcd down holds %+v (%v), want generation %d %v", c.CID(), a, ok, gen, before[c.CID()])
		}
	}
	hc.etcd.Start()
	hc.waitLeader(-1, 20*time.Second)
	eventually(t, 20*time.Second, "the groups are served again", func() bool {
		gs, err := hc.client().ListGroups(context.Background())
		return err == nil && len(gs) == 2
	})
	time.Sleep(e2eSession + time.Second) // past the new leader's restart grace
	gen2, after := settled(t, cons, 10*time.Second)
	if gen2 != gen || !mapsEqual(before, after) {
		t.Errorf("etcd's outage moved queues: generation %d %v, then %d %v", gen, before, gen2, after)
	}
	// The consumers retried through the outage; what they report is the daemon's 503s, never
	// a lost assignment (checked above).
	t.Logf("errors the consumers' OnError saw during the outage: %d", len(errs))
}

// The porcupine check of the lock history (TestLocksLinearizable's), across two failovers of
// three replicas: the leader is killed with SIGKILL twice, each time restarted as a follower.
// Never two holders of one lock, never a stale token accepted, tokens growing across leaders.
func TestHALocksLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and three replicas for ~20 s")
	}
	hc := newHACluster(t, 3)
	// The client fails over, sending a call again after an answer lost with its leader: the
	// recorder sees those attempts (attemptTransport) and records their possible effect.
	c := client.New(hc.urls(), client.WithTimeout(2*time.Second),
		client.WithHTTPClient(&http.Client{Transport: attemptTransport{http.DefaultTransport.(*http.Transport).Clone()}}))
	ctx := context.Background()
	if _, err := c.PutTopic(ctx, "T", []client.Broker{{Name: "broker-a", ReadQueues: 4, WriteQueues: 4}}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]client.Binding{
		"qg": {Strategy: "averagely", Orderly: true},
		"mg": {Strategy: "hash", Delivery: "message", Orderly: true},
	} {
		if _, err := c.PutGroup(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	failover := func() {
		old := hc.waitLeader(-1, 10*time.Second)
		hc.signal(old, syscall.SIGKILL)
		next := hc.waitLeader(old, 15*time.Second)
		t.Logf("replica %d leads after %d was killed", next, old)
		hc.start(old)
	}
	lc := &lockCluster{t: t}
	checkLockHistory(t, c, lc.beater, "kill -9 of the leader", failover, "kill -9 of the new leader", failover)
}

// The web view works on a follower: it reads through the router, so a follower, which holds
// no state of its own, shows the groups and topics the leader has.
func TestHAWebViewOnFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and two replicas")
	}
	hc := newHACluster(t, 2)
	hc.setup()
	leader := hc.waitLeader(-1, time.Second)
	follower := 1 - leader
	if r := hc.role(follower); r.Role != "follower" {
		t.Fatalf("replica %d: %+v, want a follower", follower, r)
	}
	get := func(path string) string {
		resp, err := http.Get(hc.nodes[follower].url() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s on the follower: %s: %s", path, resp.Status, b)
		}
		return string(b)
	}
	groups := get("/ui/groups")
	for _, g := range []string{"g", "qg"} {
		if !strings.Contains(groups, `href="/ui/groups/`+g+`"`) {
			t.Errorf("the follower's groups page does not list group %s:\n%s", g, groups)
		}
	}
	if topics := get("/ui/topics"); !strings.Contains(topics, "broker-a") {
		t.Errorf("the follower's topics page does not show topic T's broker-a:\n%s", topics)
	}
}

// A pending auto-scaling step survives a failover: the read raise is done and the write raise
// waits (expandWriteDelay) when the leader is killed; the new leader loads the pending step and
// raises write, so no topic is left with fewer writable than readable queues for good.
func TestHAResumesAutoscaling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd and three replicas")
	}
	hc := newHACluster(t, 3)
	leader := hc.waitLeader(-1, time.Second)
	d := hc.nodes[(leader+1)%3].daemon() // a follower: members and checks go through it
	var url atomic.Pointer[string]
	url.Store(&d.url)
	d.must(http.StatusCreated, "PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":1,"writeQueues":1}],
		"autoscale":{"enabled":true,"min":1,"max":64,"expandWriteDelay":"8s","maxConfirmWait":"30s"}}`, nil)
	d.must(http.StatusCreated, "PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	for _, cid := range []string{"c1", "c2", "c3"} {
		startMember(t, &url, "g", cid)
	}
	// Every member has confirmed the layout of 3 (so the generation that gave out the three
	// queues is stored), and the write raise waits out expandWriteDelay.
	v, _ := d.await("read rises and every member confirms it", 10*time.Second, func(v scaledView) bool {
		p := v.Autoscaling.Pending
		return counts(3, 1)(v) && p != nil && p.Phase == "raise-write" && len(p.Unconfirmed) == 0
	})
	hc.signal(leader, syscall.SIGKILL)
	hc.waitLeader(leader, 15*time.Second)
	// The new leader has the step still pending (read 3, write 1) and then completes it.
	eventually(t, 15*time.Second, "the new leader serves the topic", func() bool {
		code, _ := d.raw("GET", "/v1/topics/T", "")
		return code == http.StatusOK
	})
	if v = d.view(); !counts(3, 1)(v) || v.Autoscaling.Pending == nil || v.Autoscaling.Pending.Phase != "raise-write" {
		t.Fatalf("after the failover: %+v %+v; want the write raise still pending", v.Brokers, v.Autoscaling.Pending)
	}
	d.await("write follows on the new leader", time.Minute, counts(3, 3))
	if v := d.view(); v.Autoscaling.Pending != nil || v.Autoscaling.Target != 3 {
		t.Fatalf("after the expansion: %+v", v.Autoscaling)
	}
}
