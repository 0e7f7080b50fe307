package bench

// rocketmq-client-go's strategies beside allocd's plugins, in one run (issue 17): the peer
// computes a whole group the way its rebalance does, one call per consumer, each call with that
// consumer's id; allocd answers the whole group in one call, natively (the in-process allocator
// of internal/nativestrategy, the same algorithm packages) and as wasm through host.Plugin.Allocate.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/plugins/hash"
	"github.com/allocd/allocd/strategy"
)

// peerStrategies pairs allocd's built-in plugins with rocketmq-client-go's strategies of the same
// name. allocd's hash is Java's CONSISTENT_HASH (an MD5 ring), the Go client's a CRC32 ring
// (stathat.com/c/consistent): the same strategy, not the same answer, so only averagely and circle
// are compared for equality.
var peerStrategies = []struct {
	name  string
	peer  consumer.AllocateStrategy
	equal bool
}{
	{"averagely", consumer.AllocateByAveragely, true},
	{"circle", consumer.AllocateByAveragelyCircle, true},
	{"hash", consumer.AllocateByConsistentHash(10), false},
}

// peerGroup is req as rocketmq-client-go's rebalance hands it to a strategy: mqAll as
// *MessageQueue and cidAll, both sorted as its rebalanceImpl sorts them.
func peerGroup(req *abi.Request) ([]*primitive.MessageQueue, []string) {
	mqAll := make([]*primitive.MessageQueue, len(req.Queues))
	for i, q := range req.Queues {
		mqAll[i] = &primitive.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueId: int(q.QueueID)}
	}
	cidAll := slices.Clone(req.Consumers)
	sort.Strings(cidAll)
	sort.SliceStable(mqAll, func(i, j int) bool {
		a, b := mqAll[i], mqAll[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueId < b.QueueId
	})
	return mqAll, cidAll
}

// peerWholeGroup runs strategy once per consumer, as every consumer's own rebalance does. It is
// one operation of the rocketmq-go rows, which scripts/callgrind.sh counts by its name.
//
//go:noinline
func peerWholeGroup(strategy consumer.AllocateStrategy, group string, mqAll []*primitive.MessageQueue, cidAll []string) [][]*primitive.MessageQueue {
	out := make([][]*primitive.MessageQueue, len(cidAll))
	for i, cid := range cidAll {
		out[i] = strategy(group, cid, mqAll, cidAll)
	}
	return out
}

// samePeerAnswer checks that resp gives every consumer exactly the queues, in the order, that
// rocketmq-client-go gives it.
func samePeerAnswer(req *abi.Request, resp *abi.Response, peer [][]*primitive.MessageQueue) error {
	if len(resp.Results) != len(peer) {
		return fmt.Errorf("%d results, the peer has %d", len(resp.Results), len(peer))
	}
	for i, r := range resp.Results {
		if r.Failed {
			return fmt.Errorf("consumer %d failed: %s", i, r.Err)
		}
		if len(r.Indices) != len(peer[i]) {
			return fmt.Errorf("consumer %s: %d queues, the peer gives %d", req.Consumers[i], len(r.Indices), len(peer[i]))
		}
		for k, q := range r.Indices {
			got, want := req.Queues[q], peer[i][k]
			if got.Topic != want.Topic || got.BrokerName != want.BrokerName || int(got.QueueID) != want.QueueId {
				return fmt.Errorf("consumer %s, position %d: %v, the peer gives %v", req.Consumers[i], k, got, want)
			}
		}
	}
	return nil
}

// peerShapes are groups the agreement test runs: fewer queues than consumers, an exact multiple,
// remainders, one consumer, and the benchmark's group.
var peerShapes = []struct{ brokers, perBroker, consumers int }{
	{1, 3, 5}, {2, 4, 8}, {3, 7, 4}, {4, 256, 64}, {1, 1, 1}, {5, 13, 1}, {4, 16, 100}, {2, 500, 7},
}

func groupRequest(brokers, perBroker, consumers int) *abi.Request {
	r := &abi.Request{Group: "GID_allocd_bench"}
	for b := range brokers {
		broker := fmt.Sprintf("broker-%d", b)
		for q := range perBroker {
			r.Queues = append(r.Queues, abi.Queue{Topic: "TopicTest", BrokerName: broker, QueueID: int32(q)})
		}
	}
	for i := range consumers {
		r.Consumers = append(r.Consumers, fmt.Sprintf("10.0.0.%d@%d", i+1, 4000+i))
	}
	abi.Canonicalize(r)
	return r
}

// TestPeersAgree holds allocd's averagely and circle to rocketmq-client-go's AllocateByAveragely
// and AllocateByAveragelyCircle on groups of several shapes (the peer is the oracle, so a
// benchmark ratio compares the same answers), and each plugin's wasm to its native answer.
func TestPeersAgree(t *testing.T) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, s := range peerStrategies {
		p, err := rt.Load(ctx, s.name, buildGuest(t, "plugins/"+s.name+"/wasm", false))
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range peerShapes {
			req := groupRequest(shape.brokers, shape.perBroker, shape.consumers)
			mqAll, cidAll := peerGroup(req)
			peer := peerWholeGroup(s.peer, req.Group, mqAll, cidAll)
			wasm, err := p.Allocate(ctx, req)
			if err != nil {
				t.Fatalf("%s %v: wasm: %v", s.name, shape, err)
			}
			native, _, err := nativestrategy.Allocator{}.Allocate(ctx, s.name, req)
			if err != nil {
				t.Fatalf("%s %v: native: %v", s.name, shape, err)
			}
			if !wasm.Equal(native) {
				t.Errorf("%s %v: wasm and native answers differ", s.name, shape)
			}
			// The owner form as AllocateOwners hands it over, resolved here: the same answer.
			own, err := p.AllocateOwners(ctx, req)
			if err != nil {
				t.Fatalf("%s %v: wasm owners: %v", s.name, shape, err)
			}
			if own.Owners != nil {
				if own, err = abi.ResolveOwners(req, own.Owners); err != nil {
					t.Fatalf("%s %v: wasm owners: %v", s.name, shape, err)
				}
			}
			if !own.Equal(wasm) {
				t.Errorf("%s %v: AllocateOwners and Allocate answers differ", s.name, shape)
			}
			if !s.equal {
				continue // hash: the Go client's ring is another (CRC32) ring
			}
			if err := samePeerAnswer(req, wasm, peer); err != nil {
				t.Errorf("%s %v: %v", s.name, shape, err)
			}
		}
		p.Close(ctx)
	}
}

// TestHashMemoAgrees runs one instance of hash's wasm plugin through a history of requests, each
// answered as native hash answers it from scratch: the same group again (the guest's memo gives
// its ring back when abi.View.SameConsumers finds the ids it keeps), other virtual nodes for the
// same ids, a member joining and leaving, an id changed in its last byte or made longer, the ids
// given out of order (Allocate sorts them), and another group.
func TestHashMemoAgrees(t *testing.T) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	p, err := rt.Load(ctx, "hash", buildGuest(t, "plugins/hash/wasm", false))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	a := groupRequest(4, 16, 8)
	with := func(change func(r *abi.Request)) *abi.Request {
		r := *a
		r.Consumers = slices.Clone(a.Consumers)
		change(&r)
		return &r
	}
	vnodes3 := with(func(r *abi.Request) { r.Config = map[string]string{"vnodes": "3"} })
	joined := with(func(r *abi.Request) { r.Consumers = append(r.Consumers, "10.0.0.99@4999"); slices.Sort(r.Consumers) })
	lastByte := with(func(r *abi.Request) { c := []byte(r.Consumers[7]); c[len(c)-1]++; r.Consumers[7] = string(c) })
	longer := with(func(r *abi.Request) { r.Consumers[0] += "0" })
	swapped := with(func(r *abi.Request) { r.Consumers[2], r.Consumers[3] = r.Consumers[3], r.Consumers[2] })
	for step, req := range []*abi.Request{a, a, vnodes3, vnodes3, a, joined, a, a, lastByte, a, longer, longer, swapped, a, otherGroup(a), a} {
		got, err := p.Allocate(ctx, req) // which sorts req's lists first, as the daemon passes them
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want, _, err := nativestrategy.Allocator{}.Allocate(ctx, "hash", req)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Fatalf("step %d: the wasm plugin's answer differs from native's", step)
		}
	}
}

// BenchmarkPeers is the whole-group call of issue 17 (1024 queues: TopicTest on broker-0..3 x
// 256; 64 consumers), three ways in one run: rocketmq-go (the Go client's strategy called once
// per consumer), native (nativestrategy.Allocator: the whole group's *abi.Response from the
// algorithm packages, in process) and wasm (host.Plugin.Allocate on the built-in plugin: encoding,
// the call under its deadline, decoding and checking the answer).
func BenchmarkPeers(b *testing.B) {
	ctx := context.Background()
	cfg := host.Config{CacheDir: os.Getenv("ALLOCD_BENCH_WASM")}
	if cfg.CacheDir != "" {
		// scripts/callgrind.sh: compiled once, outside the count, and run some 50x slower
		// under valgrind than the default deadline allows.
		cfg.Timeout = 10 * time.Minute
	} else {
		cfg.CacheDir = b.TempDir()
	}
	rt, err := host.NewRuntime(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, s := range peerStrategies {
		b.Run(s.name, func(b *testing.B) {
			req := wholeGroupRequest()
			mqAll, cidAll := peerGroup(req)
			b.Run("rocketmq-go", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					peerWholeGroup(s.peer, req.Group, mqAll, cidAll)
				}
			})
			b.Run("native", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := (nativestrategy.Allocator{}).Allocate(ctx, s.name, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			if s.name == "hash" {
				// hash's wasm main keeps a hash.Memo (MD5 hashes and the ring of the last
				// members) from call to call; native-memo is the same algorithm natively with a
				// Memo, where native builds from scratch (nativestrategy keeps no state).
				b.Run("native-memo", func(b *testing.B) {
					var m hash.Memo
					want, _, err := nativestrategy.Allocator{}.Allocate(ctx, s.name, req)
					if err != nil {
						b.Fatal(err)
					}
					got := nativeHashMemo(b, &m, req)
					if !got.Equal(want) {
						b.Fatal("native-memo and native answers differ")
					}
					b.ReportAllocs()
					for b.Loop() {
						nativeHashMemo(b, &m, req)
					}
				})
			}
			b.Run("wasm", func(b *testing.B) {
				p, err := rt.Load(ctx, s.name, buildGuest(b, "plugins/"+s.name+"/wasm", false))
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close(ctx)
				want, _, err := nativestrategy.Allocator{}.Allocate(ctx, s.name, req)
				if err != nil {
					b.Fatal(err)
				}
				got, err := p.Allocate(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if !got.Equal(want) {
					b.Fatal("wasm and native answers differ")
				}
				settle(b, p.Stats, func() error { _, err := p.Allocate(ctx, req); return err })
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Allocate(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			// wasm-owners: the same call for a caller that reads the owner form itself
			// (Plugin.AllocateOwners: no per-consumer lists) and keeps its queues (QueuesFrozen:
			// the encoder knows them by address), as the rocketmq adapter's cache miss does.
			b.Run("wasm-owners", func(b *testing.B) {
				p, frozen := loadFrozen(b, rt, s.name, req)
				settle(b, p.Stats, func() error { _, err := p.AllocateOwners(ctx, frozen); return err })
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.AllocateOwners(ctx, frozen); err != nil {
						b.Fatal(err)
					}
				}
			})
			// wasm-owners-shared: the owner-form call that allocates nothing for its answer
			// (Plugin.AllocateOwnersFunc: the owners read in place, here copied into the caller's
			// own table, as a caller keeping each group's owners would).
			b.Run("wasm-owners-shared", func(b *testing.B) {
				p, frozen := loadFrozen(b, rt, s.name, req)
				table := make([]int32, len(req.Queues))
				keep := func(r *abi.Response) error {
					if len(r.Owners) != len(table) {
						return fmt.Errorf("%d owners for %d queues", len(r.Owners), len(table))
					}
					copy(table, r.Owners)
					return nil
				}
				settle(b, p.Stats, func() error { return p.AllocateOwnersFunc(ctx, frozen, keep) })
				b.ReportAllocs()
				for b.Loop() {
					if err := p.AllocateOwnersFunc(ctx, frozen, keep); err != nil {
						b.Fatal(err)
					}
				}
			})
			// embed-assign: the embedding API's whole-group call (strategy.Assign) on the group as
			// a client holds it (mqAll and cidAll, sorted), the plugin loaded from its file.
			b.Run("embed-assign", func(b *testing.B) {
				dir := b.TempDir()
				file := filepath.Join(dir, s.name+".wasm")
				if err := os.WriteFile(file, buildGuest(b, "plugins/"+s.name+"/wasm", false), 0o644); err != nil {
					b.Fatal(err)
				}
				// Under scripts/callgrind.sh the plugin's compiled code comes from the script's
				// cache and the deadline is the other rows': the count is the call's alone.
				scfg := strategy.Config{File: file, CacheDir: filepath.Join(dir, "cache")}
				if os.Getenv("ALLOCD_BENCH_WASM") != "" {
					scfg.CacheDir, scfg.Host.Timeout = cfg.CacheDir, cfg.Timeout
				}
				st, err := strategy.Open(ctx, scfg)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				g := &strategy.Group{Name: req.Group, Config: req.Config}
				for _, mq := range mqAll {
					g.Queues = append(g.Queues, strategy.Queue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: int32(mq.QueueId)})
				}
				for _, cid := range cidAll {
					g.Consumers = append(g.Consumers, strategy.Consumer{ID: cid})
				}
				settle(b, func() host.Stats { return st.Status().Stats }, func() error { _, err := st.Assign(ctx, g); return err })
				b.ReportAllocs()
				for b.Loop() {
					if _, err := st.Assign(ctx, g); err != nil {
						b.Fatal(err)
					}
				}
			})
			// A rebalance as the daemon asks for one: the group's inputs changed since the last
			// call (the daemon never calls a plugin twice on the same inputs), here a 65th
			// consumer joining and leaving by turns. For hash this is the figure that counts:
			// its memo of MD5 hashes (hash.Memo) serves the unchanged queues and consumers only.
			b.Run("wasm-rebalance", func(b *testing.B) {
				joined := wholeGroupRequest()
				joined.Consumers = append(joined.Consumers, "10.0.0.200@9999")
				abi.Canonicalize(joined)
				allocateByTurns(b, rt, s.name, req, joined)
			})
			// A plugin instance serving two groups by turns (the daemon's pool hands any
			// instance any group): the second has the same shape with other broker names and
			// consumer ids, so neither the encoder's last QUEUES section nor hash's memo serves
			// the next call. For hash this is the cold call, to compare with native (which
			// keeps no state either).
			b.Run("wasm-cold", func(b *testing.B) { allocateByTurns(b, rt, s.name, req, otherGroup(req)) })
		})
	}
}

// loadFrozen loads the built-in plugin name, closed when b ends, and returns it with req's
// copy that promises its queues never change (QueuesFrozen), as a caller keeping them does.
func loadFrozen(b *testing.B, rt *host.Runtime, name string, req *abi.Request) (*host.Plugin, *abi.Request) {
	ctx := context.Background()
	p, err := rt.Load(ctx, name, buildGuest(b, "plugins/"+name+"/wasm", false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(ctx) })
	frozen := *req
	frozen.QueuesFrozen = true
	return p, &frozen
}

// settle makes call until the plugin's linear memory has not grown for settleCalls calls in a
// row (at most maxSettleCalls), before a row's loop: the rows time a running instance, as the
// daemon's are. A Go guest's heap grows over its first thousands of calls, until its own
// collector first runs (averagely's from 3 to 7.4 MiB over its first 4,000 whole-group calls),
// and each growth copies the whole linear memory into fresh pages: some 25 MB written in all,
// which in a loop of 5,000 calls doubled some rows' time per call.
func settle(b *testing.B, stats func() host.Stats, call func() error) {
	b.Helper()
	last, same := int64(-1), 0
	for range maxSettleCalls {
		if err := call(); err != nil {
			b.Fatal(err)
		}
		if m := stats().MemoryBytes; m != last {
			last, same = m, 0
		} else if same++; same == settleCalls {
			return
		}
	}
}

const settleCalls, maxSettleCalls = 3000, 20000

// allocateByTurns loads the built-in plugin name and times Plugin.Allocate on reqs by turns.
func allocateByTurns(b *testing.B, rt *host.Runtime, name string, reqs ...*abi.Request) {
	ctx := context.Background()
	p, err := rt.Load(ctx, name, buildGuest(b, "plugins/"+name+"/wasm", false))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	i := 0
	settle(b, p.Stats, func() error { _, err := p.Allocate(ctx, reqs[i%len(reqs)]); i++; return err })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Allocate(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// otherGroup is req's shape as another group: its own group name, broker names and consumer ids.
func otherGroup(req *abi.Request) *abi.Request {
	o := &abi.Request{Group: req.Group + "-2", Queues: slices.Clone(req.Queues)}
	names := map[string]string{}
	for i := range o.Queues {
		q := &o.Queues[i]
		if names[q.BrokerName] == "" {
			names[q.BrokerName] = "other-" + q.BrokerName
		}
		q.BrokerName = names[q.BrokerName] // one string per broker, as the daemon's mqAll
	}
	for _, c := range req.Consumers {
		o.Consumers = append(o.Consumers, "9."+c)
	}
	abi.Canonicalize(o)
	return o
}

// nativeHashMemo is hash's whole-group answer as its wasm main computes it (a ring from m, the
// owners, resolved into the response), in process.
func nativeHashMemo(b *testing.B, m *hash.Memo, req *abi.Request) *abi.Response {
	ring, err := hash.NewRingMemo(len(req.Consumers), func(i int) string { return req.Consumers[i] }, hash.DefaultVirtualNodes, m)
	if err != nil {
		b.Fatal(err)
	}
	owners := make([]int32, len(req.Queues))
	ring.AssignOwners(owners, func(i int) (string, string, int32) {
		q := &req.Queues[i]
		return q.Topic, q.BrokerName, q.QueueID
	})
	resp, err := abi.ResolveOwners(req, owners)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}
