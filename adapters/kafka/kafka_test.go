package kafka

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/sticky"
	"github.com/allocd/allocd/strategy"
)

var cacheDir = filepath.Join(os.TempDir(), "allocd-test-cache")

const (
	group      = "g"
	partitions = 16
)

var topics = []string{"orders", "payments"}

// cluster is a kfake cluster with the two topics, and the group's members.
type cluster struct {
	t       *testing.T
	c       *kfake.Cluster
	plugin  string // the members' plugin file
	config  map[string]string
	zones   map[string]string // a member's zone label by name ("z-" + name by default)
	mu      sync.Mutex
	members []*consumerMember
	seen    map[string]bool // topic/partition/offset consumed
	errs    atomic.Int64    // fallbacks reported through OnError
	// own guards every member's owned set, so a partition assigned to one member can be
	// checked against all the others at that moment.
	own       sync.Mutex
	conflicts []string // partitions assigned to a member while another still owned them
}

// consumerMember is one kgo consumer using the adapter; owned follows its assigned, revoked and
// lost callbacks.
type consumerMember struct {
	name    string
	cl      *kgo.Client
	bal     *Balancer
	owned   map[string]map[int32]bool
	revoked int // partitions revoked since the last reset
	done    chan struct{}
}

func newCluster(t *testing.T, plugin string) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "s.wasm")
	copyFile(t, wasmbuild.Plugin(t, plugin), file)
	return &cluster{t: t, c: c, plugin: file, seen: map[string]bool{}}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func (k *cluster) join(name, instanceID string) *consumerMember {
	t := k.t
	t.Helper()
	zone := "z-" + name
	if z, ok := k.zones[name]; ok {
		zone = z
	}
	// Each member's balancer loads every new version at once: under -race on 2 loaded CPUs a
	// version's _initialize may pass the default 2 s deadline, and the registry tries that
	// version again a little later (registry.Options.RetryAfter).
	bal, err := NewBalancer(context.Background(), Config{PluginFile: k.plugin, CacheDir: cacheDir, Config: k.config,
		Labels: map[string]string{"zone": zone}, OnError: func(error) { k.errs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	m := &consumerMember{name: name, bal: bal, owned: map[string]map[int32]bool{}, done: make(chan struct{})}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			k.own.Lock()
			defer k.own.Unlock()
			for tp, parts := range ps {
				if m.owned[tp] == nil {
					m.owned[tp] = map[int32]bool{}
				}
				for _, p := range parts {
					if add {
						for _, o := range k.members {
							if o != m && o.owned[tp][p] {
								k.conflicts = append(k.conflicts, fmt.Sprintf("%s/%d assigned to %s while %s owns it", tp, p, m.name, o.name))
							}
						}
						m.owned[tp][p] = true
					} else {
						delete(m.owned[tp], p)
						m.revoked++
					}
				}
			}
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.c.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.Balancers(bal), kgo.HeartbeatInterval(250 * time.Millisecond),
		kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)), kgo.OnPartitionsLost(update(false)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				k.mu.Lock()
				k.seen[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = true
				k.mu.Unlock()
			})
		}
	}()
	k.mu.Lock()
	k.own.Lock()
	k.members = append(k.members, m)
	k.own.Unlock()
	k.mu.Unlock()
	t.Cleanup(func() { k.leave(m) })
	return m
}

func (k *cluster) leave(m *consumerMember) {
	k.mu.Lock()
	k.own.Lock()
	i := slices.Index(k.members, m)
	if i >= 0 {
		k.members = slices.Delete(k.members, i, i+1)
	}
	k.own.Unlock()
	k.mu.Unlock()
	if i < 0 {
		return
	}
	m.cl.Close()
	<-m.done
	m.bal.Close()
}

// plan is who owns what: member id => topic => sorted partitions.
type plan map[string]map[string][]int32

// stable waits until kfake's group is stable with every member, every partition has exactly one
// owner in kfake's view, and each client's callbacks agree with kfake's view of it. It returns
// kfake's view by member id and by member name.
func (k *cluster) stable() (plan, map[string]string) {
	t := k.t
	t.Helper()
	k.mu.Lock()
	members := slices.Clone(k.members)
	k.mu.Unlock()
	deadline := time.Now().Add(5 * time.Minute) // a loaded machine slows joins and compiles
	var last string
	for time.Now().Before(deadline) {
		info := k.c.GroupInfo(group)
		k.own.Lock()
		conflicts := slices.Clone(k.conflicts)
		k.own.Unlock()
		if len(conflicts) > 0 {
			t.Fatalf("a partition had two owners at once: %v", conflicts)
		}
		if ok, why := k.agree(info, members); ok {
			p, names := plan{}, map[string]string{}
			for _, gm := range info.Members {
				p[gm.MemberID] = sorted(gm.Assignment)
			}
			for _, m := range members {
				names[m.name], _ = m.cl.GroupMetadata()
			}
			return p, names
		} else {
			last = why
		}
		time.Sleep(20 * time.Millisecond) // polling kfake's state, not waiting out a timer
	}
	t.Fatalf("group never settled: %s", last)
	return nil, nil
}

func (k *cluster) agree(info *kfake.GroupInfo, members []*consumerMember) (bool, string) {
	if info == nil || info.State != "Stable" || len(info.Members) != len(members) {
		if info == nil {
			return false, "no group"
		}
		return false, fmt.Sprintf("state %s with %d of %d members", info.State, len(info.Members), len(members))
	}
	owner := map[string]string{}
	byID := map[string]kfake.GroupMember{}
	for _, gm := range info.Members {
		byID[gm.MemberID] = gm
		for tp, ps := range gm.Assignment {
			for _, p := range ps {
				key := fmt.Sprintf("%s/%d", tp, p)
				if o, dup := owner[key]; dup {
					return false, fmt.Sprintf("%s owned by %s and %s", key, o, gm.MemberID)
				}
				owner[key] = gm.MemberID
			}
		}
	}
	if len(owner) != partitions*len(topics) {
		return false, fmt.Sprintf("%d of %d partitions owned", len(owner), partitions*len(topics))
	}
	for _, m := range members {
		id, _ := m.cl.GroupMetadata()
		gm, ok := byID[id]
		if !ok {
			return false, fmt.Sprintf("member %s (%s) not in kfake's group", m.name, id)
		}
		k.own.Lock()
		mine := map[string][]int32{}
		for tp, ps := range m.owned {
			for p := range ps {
				mine[tp] = append(mine[tp], p)
			}
		}
		k.own.Unlock()
		if !samePlan(sorted(mine), sorted(gm.Assignment)) {
			return false, fmt.Sprintf("member %s's callbacks say %v, kfake says %v", m.name, sorted(mine), sorted(gm.Assignment))
		}
	}
	return true, ""
}

func sorted(a map[string][]int32) map[string][]int32 {
	out := map[string][]int32{}
	for tp, ps := range a {
		if len(ps) > 0 {
			out[tp] = slices.Sorted(slices.Values(ps))
		}
	}
	return out
}

func samePlan(a, b map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

// expected is the plugin's own answer for these members (by member id), asked directly.
func expected(t *testing.T, pluginFile string, members []string) plan {
	t.Helper()
	return expectedZoned(t, pluginFile, members, nil, "")
}

// expectedZoned is expected with each member's zone label (by member id) and every partition's
// zone, "" for none.
func expectedZoned(t *testing.T, pluginFile string, members []string, zones map[string]string, partitionZone string) plan {
	t.Helper()
	s, err := strategy.Open(context.Background(), strategy.Config{File: pluginFile, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := &strategy.Group{Name: group}
	for _, tp := range topics {
		for p := range int32(partitions) {
			q := strategy.Queue{Topic: tp, QueueID: p}
			if partitionZone != "" {
				q.Labels = map[string]string{"zone": partitionZone}
			}
			g.Queues = append(g.Queues, q)
		}
	}
	sort.Strings(members)
	for _, m := range members {
		c := strategy.Consumer{ID: m}
		if z, ok := zones[m]; ok {
			c.Labels = map[string]string{"zone": z}
		}
		g.Consumers = append(g.Consumers, c)
	}
	a, err := s.Assign(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	out := plan{}
	for i, qs := range a.Owned {
		asg := map[string][]int32{}
		for _, q := range qs {
			asg[g.Queues[q].Topic] = append(asg[g.Queues[q].Topic], g.Queues[q].QueueID)
		}
		out[members[i]] = sorted(asg)
	}
	return out
}

func (k *cluster) produce(n int) {
	t := k.t
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		for _, tp := range topics {
			r := &kgo.Record{Topic: tp, Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v")}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (k *cluster) consumedAll(n int) {
	t := k.t
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		k.mu.Lock()
		got := len(k.seen)
		k.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d of %d records", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func plansEqual(a, b plan) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]int32) bool { return samePlan(x, y) })
}

// Four consumers share two topics of 16 partitions by the plugin's plan, consume every record,
// and a replaced plugin file decides the next plan.
func TestGroupConsumesByThePluginsPlan(t *testing.T) {
	k := newCluster(t, "averagely")
	k.produce(200)
	for i := range 4 {
		k.join(fmt.Sprintf("m%d", i), "")
	}
	got, _ := k.stable()
	if want := expected(t, k.plugin, slices.Collect(maps.Keys(got))); !plansEqual(got, want) {
		t.Fatalf("plan %v, want the plugin's %v", got, want)
	}
	k.consumedAll(400)

	// Replace the plugin; the next rebalance (a fifth member) follows the new one.
	copyFile(t, wasmbuild.Plugin(t, "circle"), k.plugin)
	waitReloaded(t, k)
	k.join("m4", "")
	got, _ = k.stable()
	if want := expected(t, k.plugin, slices.Collect(maps.Keys(got))); !plansEqual(got, want) {
		t.Fatalf("after the reload: plan %v, want circle's %v", got, want)
	}
	if k.errs.Load() != 0 {
		t.Fatalf("%d fallbacks", k.errs.Load())
	}
}

// waitReloaded waits until every member's balancer serves the file's current contents.
func waitReloaded(t *testing.T, k *cluster) {
	t.Helper()
	b, _ := os.ReadFile(k.plugin)
	want := host.Hash(b)
	deadline := time.Now().Add(8 * time.Minute) // a compile under the race detector on a loaded machine
	for {
		all := true
		k.mu.Lock()
		for _, m := range k.members {
			all = all && m.bal.s.Version().Hash == want
		}
		k.mu.Unlock()
		if all {
			return
		}
		if time.Now().After(deadline) {
			// Each balancer's view of the file, so that a refused or never-seen version shows.
			k.mu.Lock()
			for _, m := range k.members {
				st := m.bal.s.Status()
				t.Logf("serving %.12s, last attempt %.12s at %v: %q (%d reloads, %d failures)",
					st.ActiveHash, st.LastAttemptHash, st.LastAttempt, st.LastError, st.Reloads, st.Failures)
			}
			k.mu.Unlock()
			t.Fatalf("the balancers did not reload the plugin %.12s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With sticky, a fifth member takes the minimum: only the partitions the new load bound takes
// from members over it, nothing moves between the four, and nothing else is revoked.
func TestStickyFifthMemberMovesTheMinimum(t *testing.T) {
	k := newCluster(t, "sticky")
	k.config = map[string]string{"balance": "1"}
	var ms []*consumerMember
	for i := range 4 {
		ms = append(ms, k.join(fmt.Sprintf("m%d", i), ""))
	}
	before, _ := k.stable()
	for _, m := range ms {
		k.own.Lock()
		m.revoked = 0
		k.own.Unlock()
	}
	fifth := k.join("m4", "")
	after, _ := k.stable()
	id, _ := fifth.cl.GroupMetadata()
	total := partitions * len(topics)
	bound := sticky.Bound(total, 5, 1)
	want := 0
	for mid, asg := range before {
		load := 0
		for _, ps := range asg {
			load += len(ps)
		}
		want += max(0, load-bound)
		for tp, ps := range after[mid] {
			for _, p := range ps {
				if !slices.Contains(asg[tp], p) {
					t.Errorf("%s/%d moved to %s, an old member", tp, p, mid)
				}
			}
		}
	}
	moved, revoked := 0, 0
	for _, ps := range after[id] {
		moved += len(ps)
	}
	for _, m := range ms {
		k.own.Lock()
		revoked += m.revoked
		k.own.Unlock()
	}
	if moved != want || want == 0 {
		t.Errorf("the fifth member got %d partitions, want the %d over the bound of %d", moved, want, bound)
	}
	if revoked != moved {
		t.Errorf("%d partitions revoked for %d moved", revoked, moved)
	}
}

// A plugin that traps in service leaves the group consuming: the balancer falls back and says so.
func TestTrappingPluginLeavesTheGroupConsuming(t *testing.T) {
	k := newCluster(t, "averagely")
	copyFile(t, wasmbuild.Path(t, "strategy/testdata/plugins/selftestonly"), k.plugin)
	k.produce(100)
	k.join("m0", "")
	k.join("m1", "")
	k.stable()
	k.consumedAll(200)
	if k.errs.Load() == 0 {
		t.Fatal("no fallback reported")
	}
}

// A member with an instance id that restarts keeps its partitions.
func TestStaticMemberRestartKeepsItsPartitions(t *testing.T) {
	k := newCluster(t, "sticky")
	k.join("m0", "static-0")
	m1 := k.join("m1", "static-1")
	k.join("m2", "static-2")
	k.stable()
	k.own.Lock()
	before := map[string][]int32{}
	for tp, ps := range m1.owned {
		for p := range ps {
			before[tp] = append(before[tp], p)
		}
	}
	k.own.Unlock()
	k.leave(m1)
	again := k.join("m1", "static-1")
	k.stable()
	k.own.Lock()
	after := map[string][]int32{}
	for tp, ps := range again.owned {
		for p := range ps {
			after[tp] = append(after[tp], p)
		}
	}
	k.own.Unlock()
	if !samePlan(sorted(before), sorted(after)) {
		t.Fatalf("restarted static member owns %v, had %v", sorted(after), sorted(before))
	}
}

// Rack-aware assignment end to end (KIP-881): the members' zones travel as their racks, so the
// leader's client loads each partition leader's rack (kfake puts every broker in rack "krack")
// and the plugin sees it as the partition's zone. With sticky, the member in "krack" takes the
// partitions up to its load bound, and the plan is the plugin's answer for those zones.
func TestRackAwareAssignment(t *testing.T) {
	k := newCluster(t, "sticky")
	k.zones = map[string]string{"near": "krack", "far": "elsewhere"}
	k.join("near", "")
	k.join("far", "")
	got, names := k.stable()
	zones := map[string]string{names["near"]: "krack", names["far"]: "elsewhere"}
	want := expectedZoned(t, k.plugin, slices.Collect(maps.Keys(got)), zones, "krack")
	if !plansEqual(got, want) {
		t.Fatalf("plan %v, want the plugin's answer with the partitions' racks %v", got, want)
	}
	count := func(m map[string][]int32) (n int) {
		for _, ps := range m {
			n += len(ps)
		}
		return n
	}
	total := partitions * len(topics)
	if near, bound := count(got[names["near"]]), sticky.Bound(total, 2, sticky.DefaultBalance); near != bound {
		t.Fatalf("the member in the partitions' rack owns %d, want its bound %d", near, bound)
	}
	if blind := expected(t, k.plugin, slices.Collect(maps.Keys(got))); plansEqual(got, blind) {
		t.Fatal("the plan is the one without racks: the racks did not reach the plugin")
	}
}
