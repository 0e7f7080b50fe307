package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/strategy"
)

var cacheDir string

func TestMain(m *testing.M) {
	// Compiled code is kept across runs, as the daemon's e2e tests keep theirs: compiling a Go
	// guest under the race detector on a busy machine takes tens of seconds.
	cacheDir = filepath.Join(os.TempDir(), "allocd-test-cache")
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// events collects a strategy's events for a test to wait on.
type events chan strategy.Event

func (e events) wait(t *testing.T, kind registry.EventKind) strategy.Event {
	t.Helper()
	// A compile under the race detector on a loaded 2-core machine can take minutes.
	timeout := time.After(8 * time.Minute)
	var seen []string
	for {
		select {
		case ev := <-e:
			if ev.Kind == kind {
				return ev
			}
			seen = append(seen, string(ev.Kind)+" "+ev.Err)
		case <-timeout:
			t.Fatalf("no %s event (saw %q)", kind, seen)
		}
	}
}

func open(t *testing.T, cfg strategy.Config) (*strategy.Strategy, events) {
	t.Helper()
	ev := make(events, 64)
	cfg.OnEvent = func(e strategy.Event) { ev <- e }
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	cfg.Host.Timeout = 30 * time.Second // the race detector and a busy machine slow instances
	s, err := strategy.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ev
}

// install writes a plugin's module to path the way a deployment does: to a temporary name,
// then renamed over the file.
func install(t *testing.T, path string, wasm []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".install.tmp")
	if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func plugin(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(wasmbuild.Plugin(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func group(queues, consumers int) *strategy.Group {
	g := &strategy.Group{Name: "g"}
	for i := range queues {
		g.Queues = append(g.Queues, strategy.Queue{Topic: "T", BrokerName: "broker-a", QueueID: int32(i)})
	}
	for i := range consumers {
		g.Consumers = append(g.Consumers, strategy.Consumer{ID: fmt.Sprintf("c%02d", i)})
	}
	return g
}

// native is what a RocketMQ-style function gives every consumer of a sorted group.
func native(fn func(dst []int, n, c, self int) []int, n, c int) [][]int {
	out := make([][]int, c)
	for i := range c {
		out[i] = fn(nil, n, c, i)
	}
	return out
}

func equal(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}

func TestFileServesAndReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.wasm")
	install(t, path, plugin(t, "averagely"))
	os.WriteFile(filepath.Join(filepath.Dir(path), "other.wasm"), []byte("not a module"), 0o644)
	s, ev := open(t, strategy.Config{File: path})
	if s.Name() != "s" || s.Version().Hash != host.Hash(plugin(t, "averagely")) {
		t.Fatalf("serving %s %+v, want s at averagely's hash", s.Name(), s.Version())
	}
	g := group(10, 4)
	a, err := s.Assign(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if want := native(averagely.Allocate, 10, 4); !equal(a.Owned, want) {
		t.Fatalf("averagely: %v, want %v", a.Owned, want)
	}

	// A new version replaces the old one once it has passed its checks.
	install(t, path, plugin(t, "circle"))
	ev.wait(t, registry.Reloaded)
	a, err = s.Assign(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	if want := native(circle.Allocate, 10, 4); !equal(a.Owned, want) || a.Version.Hash != host.Hash(plugin(t, "circle")) {
		t.Fatalf("after the reload: %v from %s, want circle's %v", a.Owned, a.Version.Hash[:12], want)
	}

	// A version that fails its checks never serves: circle keeps answering.
	install(t, path, wasmbuild.Bytes(t, "host/testdata/plugins/trap"))
	if e := ev.wait(t, registry.Failed); e.Err == "" {
		t.Fatal("a rejected version without a reason")
	}
	a, err = s.Assign(context.Background(), g)
	if err != nil || !equal(a.Owned, native(circle.Allocate, 10, 4)) {
		t.Fatalf("after a bad version: %v %v, want circle's answer", a, err)
	}
	if st := s.Status(); st.LastError == "" || st.Failures != 1 {
		t.Fatalf("status %+v, want the rejection recorded", st)
	}
	// other.wasm in the same folder is none of this strategy's business.
	if st := s.Status(); st.Name != "s" {
		t.Fatalf("status of %q", st.Name)
	}
}

// The caller's order is kept: the answer's indices refer to the caller's slices, whatever
// order the plugin saw them in.
func TestAssignKeepsTheCallersOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "averagely.wasm")
	install(t, path, plugin(t, "averagely"))
	s, _ := open(t, strategy.Config{File: path})
	sorted := group(7, 3)
	want, err := s.Assign(context.Background(), sorted)
	if err != nil {
		t.Fatal(err)
	}
	// Reverse both lists: each consumer must own the same queues, named by the new indices.
	shuffled := &strategy.Group{Name: "g"}
	for i := len(sorted.Queues) - 1; i >= 0; i-- {
		shuffled.Queues = append(shuffled.Queues, sorted.Queues[i])
	}
	for i := len(sorted.Consumers) - 1; i >= 0; i-- {
		shuffled.Consumers = append(shuffled.Consumers, sorted.Consumers[i])
	}
	got, err := s.Assign(context.Background(), shuffled)
	if err != nil {
		t.Fatal(err)
	}
	for ci, c := range shuffled.Consumers {
		var gotIDs, wantIDs []int32
		for _, q := range got.Owned[ci] {
			gotIDs = append(gotIDs, shuffled.Queues[q].QueueID)
		}
		for _, q := range want.Owned[len(sorted.Consumers)-1-ci] {
			wantIDs = append(wantIDs, sorted.Queues[q].QueueID)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Errorf("%s owns %v in the reversed group, %v in the sorted one", c.ID, gotIDs, wantIDs)
		}
	}
}

// A group asked about again with the same queues reuses the last canonical list; one whose
// queues changed in place, in the same slice, is asked about with its new queues.
func TestAssignSeesQueuesChangedInPlace(t *testing.T) {
	s, path := hashStrategy(t)
	ctx := context.Background()
	g := group(64, 4)
	first, err := s.Assign(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Assign(ctx, g)
	if err != nil || !equal(again.Owned, first.Owned) || !equal(first.Owned, alone(t, path, g)) {
		t.Fatalf("the same group twice: %v then %v (%v)", first.Owned, again.Owned, err)
	}
	// The upper half moves to another broker, in place: still in canonical order.
	for i := 32; i < 64; i++ {
		g.Queues[i].BrokerName = "broker-b"
	}
	moved, err := s.Assign(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if want := alone(t, path, g); !equal(moved.Owned, want) || equal(moved.Owned, first.Owned) {
		t.Fatalf("queues changed in place: %v, want %v (before the change %v)", moved.Owned, want, first.Owned)
	}
	// With labels, the list is built afresh (TestSameQueues holds the comparison to them).
	g.Queues[0].Labels = map[string]string{"zone": "a"}
	labelled, err := s.Assign(ctx, g)
	if err != nil || !equal(labelled.Owned, alone(t, path, g)) {
		t.Fatalf("with labels: %v, %v", labelled.Owned, err)
	}
}

// A group asked about again with the same consumers reuses the last id list (and, for consumers
// out of order, the permutation back to the caller's order); consumers changed in place, in the
// same slice (an id replaced, two swapped, labels set), are asked about as they are now.
func TestAssignSeesConsumersChangedInPlace(t *testing.T) {
	s, path := hashStrategy(t)
	ctx := context.Background()
	g := group(64, 6)
	slices.Reverse(g.Consumers) // out of canonical order: a permutation comes with the list
	for step, change := range []func(){
		func() {},
		func() { g.Consumers[2].ID = "c99" },
		func() { g.Consumers[0], g.Consumers[5] = g.Consumers[5], g.Consumers[0] },
		func() { slices.SortFunc(g.Consumers, byID) },    // in canonical order: no permutation
		func() { g.Consumers[1].ID = g.Consumers[0].ID }, // a repeated id shares its list
		func() { g.Consumers[4].Labels = map[string]string{"zone": "a"} },
		func() { g.Consumers[4].Labels["zone"] = "b" },
		func() { g.Consumers = g.Consumers[:3] },
	} {
		change()
		for again := range 2 {
			got, err := s.Assign(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if want := alone(t, path, g); !equal(got.Owned, want) {
				t.Fatalf("step %d, call %d: %v, want %v", step, again, got.Owned, want)
			}
		}
	}
}

func byID(a, b strategy.Consumer) int { return strings.Compare(a.ID, b.ID) }

// hashStrategy opens a Strategy on the hash plugin installed in a folder of its own, and
// returns it with the plugin's path (for alone).
func hashStrategy(t *testing.T) (*strategy.Strategy, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hash.wasm")
	install(t, path, plugin(t, "hash"))
	s, _ := open(t, strategy.Config{File: path})
	return s, path
}

// alone is the answer for g of a Strategy on the plugin at path that never saw a group, asked
// with copies of g's lists.
func alone(t *testing.T, path string, g *strategy.Group) [][]int {
	t.Helper()
	fresh, _ := open(t, strategy.Config{File: path})
	c := &strategy.Group{Name: g.Name, Queues: slices.Clone(g.Queues), Consumers: slices.Clone(g.Consumers)}
	a, err := fresh.Assign(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return a.Owned
}

// Calls in parallel on groups of different queues each get their own group's answer.
func TestAssignInParallelOnOtherQueues(t *testing.T) {
	s, path := hashStrategy(t)
	ctx := context.Background()
	groups := []*strategy.Group{group(64, 4), group(64, 4), group(48, 4), group(64, 5), group(64, 4)}
	for i := range groups[1].Queues {
		groups[1].Queues[i].BrokerName = "broker-b"
	}
	groups[4].Consumers[0].ID = "c09" // the same queues as group 0, other consumers
	want := make([][][]int, len(groups))
	for i, g := range groups {
		want[i] = alone(t, path, g)
	}
	if equal(want[0], want[1]) || equal(want[0], want[4]) || equal(want[0], want[3]) {
		t.Fatal("the test's groups give the same answer")
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for k := range 30 {
				i := (w + k) % len(groups)
				a, err := s.Assign(ctx, groups[i])
				if err != nil || !equal(a.Owned, want[i]) {
					t.Errorf("group %d: %v, %v; want %v", i, a, err, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.wasm")
	os.WriteFile(bad, []byte("\x00asm garbage"), 0o644)
	for _, c := range []struct {
		name string
		cfg  strategy.Config
		want string
	}{
		{"nothing", strategy.Config{}, "set Config.File"},
		{"both", strategy.Config{File: bad, Daemon: "http://x"}, "not both"},
		{"no name", strategy.Config{Daemon: "http://x"}, "needs Config.Name"},
		{"missing", strategy.Config{File: filepath.Join(dir, "none.wasm")}, "no such file"},
		{"suffix", strategy.Config{File: filepath.Join(dir, "x.bin")}, "NAME.wasm"},
		{"corrupt", strategy.Config{File: bad}, "no version serving"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.CacheDir = cacheDir
			s, err := strategy.Open(context.Background(), c.cfg)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to say %q", err, c.want)
			}
		})
	}
}

// A plugin that passes its checks but traps in service costs each call an error, and the
// strategy keeps serving (the next call runs on a fresh instance).
func TestAssignErrorOnATrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.wasm")
	install(t, path, wasmbuild.Bytes(t, "strategy/testdata/plugins/selftestonly"))
	s, _ := open(t, strategy.Config{File: path})
	for range 2 {
		a, err := s.Assign(context.Background(), group(4, 2))
		if err == nil {
			t.Fatalf("a trapping plugin answered %v", a.Owned)
		}
		if !strings.Contains(err.Error(), "strategy s") {
			t.Fatalf("error %q does not name the strategy", err)
		}
	}
}

// AssignRequest answers a canonical request as Assign answers the same group, and refuses one
// out of canonical order (whose answer's indices would not refer to the caller's lists).
func TestAssignRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "averagely.wasm")
	install(t, path, plugin(t, "averagely"))
	s, _ := open(t, strategy.Config{File: path})
	g := group(10, 3)
	want, err := s.Assign(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	req := &abi.Request{Group: g.Name}
	for _, q := range g.Queues {
		req.Queues = append(req.Queues, abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	for _, c := range g.Consumers {
		req.Consumers = append(req.Consumers, c.ID)
	}
	resp, v, err := s.AssignRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if v != want.Version || len(resp.Results) != len(want.Owned) {
		t.Fatalf("version %+v with %d results, want %+v with %d", v, len(resp.Results), want.Version, len(want.Owned))
	}
	for i, r := range resp.Results {
		if !slices.Equal(r.Indices, want.Owned[i]) {
			t.Errorf("consumer %d: AssignRequest %v, Assign %v", i, r.Indices, want.Owned[i])
		}
	}
	// AssignOwners: averagely answers in the owner form, which names the same owners.
	own, ov, err := s.AssignOwners(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if ov != want.Version || own.Owners == nil || len(own.Results) != 0 {
		t.Fatalf("AssignOwners: version %+v, %d owners, %d results; want %+v, owners only", ov, len(own.Owners), len(own.Results), want.Version)
	}
	for c, owned := range want.Owned {
		for _, q := range owned {
			if own.Owners[q] != int32(c) {
				t.Errorf("queue %d: AssignOwners names owner %d, Assign %d", q, own.Owners[q], c)
			}
		}
	}
	// AssignOwnersFunc hands the same checked answer to its callback, whose error comes back as it is.
	var shared []int32
	mine := errors.New("the caller's own error")
	err = s.AssignOwnersFunc(context.Background(), req, func(r *abi.Response, fv strategy.Version) error {
		if fv != want.Version || len(r.Results) != 0 {
			t.Errorf("AssignOwnersFunc: version %+v, %d results; want %+v, owners only", fv, len(r.Results), want.Version)
		}
		shared = slices.Clone(r.Owners)
		return mine
	})
	if err != mine {
		t.Fatalf("AssignOwnersFunc returned %v, want the callback's error as it is", err)
	}
	if !slices.Equal(shared, own.Owners) {
		t.Fatalf("AssignOwnersFunc owners %v, AssignOwners %v", shared, own.Owners)
	}
	queues := req.Queues
	req.Queues = slices.Clone(queues)
	slices.Reverse(req.Queues)
	reversed := req.Queues
	called := false
	err = s.AssignOwnersFunc(context.Background(), req, func(*abi.Response, strategy.Version) error { called = true; return nil })
	if err == nil || called || !strings.Contains(err.Error(), "canonical order") || strings.Count(err.Error(), "strategy ") != 1 {
		t.Fatalf("AssignOwnersFunc, out-of-order request: %v (callback called: %v), want one refusal naming the order", err, called)
	}
	req.Queues = reversed
	if _, _, err := s.AssignRequest(context.Background(), req); err == nil || !strings.Contains(err.Error(), "canonical order") {
		t.Fatalf("out-of-order request: %v, want a refusal naming the order", err)
	}
	if _, _, err := s.AssignOwners(context.Background(), req); err == nil || !strings.Contains(err.Error(), "canonical order") {
		t.Fatalf("AssignOwners, out-of-order request: %v, want a refusal naming the order", err)
	}
	req.Queues = reversed
	if &req.Queues[0] != &reversed[0] {
		t.Fatal("the refused request's queues were replaced")
	}
}

// Assign reads an owner-form answer into the group's own indices itself; a list-form answer
// (config, which answers one consumer at a time) goes through the Response's lists. Either way
// each consumer, named by the caller's indices, owns what the host's checked list-form answer
// to the canonical request gives it, in the same order: on shuffled groups with repeated
// consumer ids (which the SDK answers in the list form), queues of several topics and brokers,
// and a group asked about twice (the second time on the kept queue list).
func TestAssignAgreesWithTheCanonicalAnswer(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"averagely", "circle", "hash", "config"} {
		path := filepath.Join(dir, name+".wasm")
		install(t, path, plugin(t, name))
		s, _ := open(t, strategy.Config{File: path})
		rng := rand.New(rand.NewPCG(17, uint64(len(name))))
		for trial := range 40 {
			g := randomGroup(rng)
			for round := range 2 {
				got, err := s.Assign(context.Background(), g)
				if err != nil {
					t.Fatalf("%s trial %d: %v", name, trial, err)
				}
				if err := sameAsCanonical(s, g, got); err != nil {
					t.Fatalf("%s trial %d round %d (%d queues, %d consumers): %v", name, trial, round, len(g.Queues), len(g.Consumers), err)
				}
			}
		}
	}
}

// randomGroup is a group of 1 to 60 distinct queues and 1 to 12 consumers, some ids given
// twice, both lists shuffled.
func randomGroup(rng *rand.Rand) *strategy.Group {
	g := &strategy.Group{Name: "g"}
	for _, topic := range []string{"T1", "T0", "T2"}[:1+rng.IntN(3)] {
		for b := range 1 + rng.IntN(3) {
			for id := range 1 + rng.IntN(20) {
				g.Queues = append(g.Queues, strategy.Queue{Topic: topic, BrokerName: fmt.Sprintf("broker-%d", b), QueueID: int32(id)})
			}
		}
	}
	for range 1 + rng.IntN(12) {
		g.Consumers = append(g.Consumers, strategy.Consumer{ID: fmt.Sprintf("10.0.0.%d@1", rng.IntN(10))})
	}
	rng.Shuffle(len(g.Queues), func(i, j int) { g.Queues[i], g.Queues[j] = g.Queues[j], g.Queues[i] })
	rng.Shuffle(len(g.Consumers), func(i, j int) { g.Consumers[i], g.Consumers[j] = g.Consumers[j], g.Consumers[i] })
	return g
}

// sameAsCanonical compares a's lists with AssignRequest's on g sorted into canonical order,
// queue by queue.
func sameAsCanonical(s *strategy.Strategy, g *strategy.Group, a *strategy.Assignment) error {
	req := &abi.Request{Group: g.Name}
	for _, q := range g.Queues {
		req.Queues = append(req.Queues, abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	for _, c := range g.Consumers {
		req.Consumers = append(req.Consumers, c.ID)
	}
	abi.Canonicalize(req)
	resp, _, err := s.AssignRequest(context.Background(), req)
	if err != nil {
		return err
	}
	if len(a.Owned) != len(g.Consumers) {
		return fmt.Errorf("%d lists for %d consumers", len(a.Owned), len(g.Consumers))
	}
	for c, owned := range a.Owned {
		i, _ := slices.BinarySearch(req.Consumers, g.Consumers[c].ID) // the first of its id
		var got, want []abi.Queue
		for _, k := range owned {
			q := g.Queues[k]
			got = append(got, abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
		}
		for _, j := range resp.Results[i].Indices {
			want = append(want, req.Queues[j])
		}
		if !slices.Equal(got, want) {
			k := 0
			for k < min(len(got), len(want)) && got[k] == want[k] {
				k++
			}
			return fmt.Errorf("consumer %d (%s) owns %d queues, the canonical answer %d; they differ from position %d", c, g.Consumers[c].ID, len(got), len(want), k)
		}
	}
	return nil
}
