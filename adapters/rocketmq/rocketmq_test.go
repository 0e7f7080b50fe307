package rocketmq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/allocd/allocd/internal/wasmbuild"
	javavectors "github.com/allocd/allocd/plugins/rocketmq"
)

var cacheDir = filepath.Join(os.TempDir(), "allocd-test-cache")

// The adapter is a consumer.AllocateStrategy.
var _ consumer.AllocateStrategy = (*Strategy)(nil).Allocate

func open(t testing.TB, plugin string, cfg Config) *Strategy {
	t.Helper()
	cfg.PluginFile = wasmbuild.Plugin(t, plugin)
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second // the race detector and a busy machine slow instances
	}
	s, err := NewStrategy(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rocketmqGroup makes mqAll and cidAll as doBalance passes them: queues of one topic over
// brokers, sorted by broker and queue id; client ids in RocketMQ's ip@pid[@unit] style, sorted.
func rocketmqGroup(r *rand.Rand, queues, consumers int) ([]*primitive.MessageQueue, []string) {
	brokers := 1 + r.IntN(4)
	var mqAll []*primitive.MessageQueue
	for b := range brokers {
		for id := range (queues + brokers - 1 - b) / brokers {
			mqAll = append(mqAll, &primitive.MessageQueue{Topic: "TopicTest", BrokerName: fmt.Sprintf("broker-%c", 'a'+b), QueueId: id})
		}
	}
	cidAll := make([]string, consumers)
	for i := range cidAll {
		cidAll[i] = fmt.Sprintf("10.%d.%d.%d@%d", r.IntN(4), r.IntN(256), r.IntN(256), 1000+r.IntN(60000))
		if r.IntN(4) == 0 {
			cidAll[i] += "@unit" + strconv.Itoa(r.IntN(3))
		}
	}
	sort.Strings(cidAll)
	sort.SliceStable(mqAll, func(i, j int) bool {
		a, b := mqAll[i], mqAll[j]
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueId < b.QueueId
	})
	return mqAll, cidAll
}

// same reports whether two answers hold the same pointers in the same order, nil equal only to nil.
func same(a, b []*primitive.MessageQueue) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// On generated groups the adapter answers exactly what rocketmq-client-go's own strategies
// answer: the same pointers, in the same order, nil where they give nil.
func TestMatchesTheClientsBuiltins(t *testing.T) {
	for _, c := range []struct {
		plugin  string
		builtin consumer.AllocateStrategy
	}{
		{"averagely", consumer.AllocateByAveragely},
		{"circle", consumer.AllocateByAveragelyCircle},
	} {
		t.Run(c.plugin, func(t *testing.T) {
			s := open(t, c.plugin, Config{})
			r := rand.New(rand.NewPCG(11, 17))
			sizes := [][2]int{{1, 1}, {1, 300}, {2000, 1}, {2000, 300}, {7, 3}, {3, 7}, {1024, 64}}
			for range 40 {
				sizes = append(sizes, [2]int{1 + r.IntN(2000), 1 + r.IntN(300)})
			}
			calls := 0
			for _, sz := range sizes {
				mqAll, cidAll := rocketmqGroup(r, sz[0], sz[1])
				cids := append([]string{"10.9.9.9@1", ""}, cidAll...) // a stranger, and no cid
				for _, cid := range cids {
					got, want := s.Allocate("CG", cid, mqAll, cidAll), c.builtin("CG", cid, mqAll, cidAll)
					if !same(got, want) {
						t.Fatalf("%d queues, %d consumers, cid %q: adapter %v, client %v", len(mqAll), len(cidAll), cid, got, want)
					}
					calls++
				}
			}
			t.Logf("%d calls on %d groups agree", calls, len(sizes))
		})
	}
}

// With hash, the adapter answers what RocketMQ's Java AllocateMessageQueueConsistentHash answers
// (the recorded vectors), which rocketmq-client-go's own AllocateByConsistentHash does not.
func TestHashMatchesJavaNotTheGoClient(t *testing.T) {
	vs, err := javavectors.LoadVectors("../../testdata/rocketmq-java-vectors-small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	byVnodes := map[int]*Strategy{}
	agree, goDisagrees, goPanics := 0, 0, 0
	for _, v := range vs {
		if v.Strategy != "CONSISTENT_HASH" {
			continue
		}
		s := byVnodes[v.Vnodes]
		if s == nil {
			s = open(t, "hash", Config{Config: map[string]string{"vnodes": strconv.Itoa(v.Vnodes)}})
			byVnodes[v.Vnodes] = s
		}
		mqAll := make([]*primitive.MessageQueue, len(v.MQAll))
		for i, q := range v.MQAll {
			mqAll[i] = &primitive.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueId: int(q.QueueID)}
		}
		got := s.Allocate(v.Group, v.CID, mqAll, v.CIDAll)
		if !v.HasResult {
			// Java threw (an empty cid, mqAll or cidAll): the client gets nil, as from its own.
			if got != nil {
				t.Fatalf("line %d: Java threw %q, adapter answered %v", v.Line, v.Error, got)
			}
			continue
		}
		want := make([]*primitive.MessageQueue, len(v.Result))
		for i, q := range v.Result {
			want[i] = mqAll[q]
		}
		if len(want) == 0 && !v.MemberOfCidAll {
			want = nil // Java's empty list for a stranger is the client's nil
		}
		if !same(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("line %d (%s): adapter %v, Java %v", v.Line, v.Family, got, want)
		}
		agree++
		goc, panicked := goConsistentHash(v.Vnodes, v.Group, v.CID, mqAll, v.CIDAll)
		switch {
		case panicked:
			goPanics++
		case !same(goc, want) && len(want) > 0:
			goDisagrees++
		}
	}
	if agree == 0 {
		t.Fatal("no CONSISTENT_HASH vectors")
	}
	t.Logf("%d Java vectors agree; rocketmq-client-go's AllocateByConsistentHash disagrees with Java on %d and panics on %d (vnodes 0)", agree, goDisagrees, goPanics)
	if goDisagrees == 0 {
		t.Fatal("rocketmq-client-go's consistent hash agreed with Java on every vector: the README's claim is wrong")
	}
}

// A plugin that fails in service never costs the consumer its queues: Allocate returns the
// last good answer (of the queues still in mqAll), never nil, never a panic, and reports it.
func TestFailureKeepsTheLastGoodAnswer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.wasm")
	install := func(wasm []byte) {
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	good, _ := os.ReadFile(wasmbuild.Plugin(t, "averagely"))
	install(good)
	var failures atomic.Int64
	s, err := NewStrategy(context.Background(), Config{PluginFile: path, CacheDir: cacheDir, Timeout: 30 * time.Second,
		OnError: func(error) { failures.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mqAll, cidAll := rocketmqGroup(rand.New(rand.NewPCG(1, 2)), 12, 3)
	first := s.Allocate("CG", cidAll[1], mqAll, cidAll)
	if !same(first, consumer.AllocateByAveragely("CG", cidAll[1], mqAll, cidAll)) {
		t.Fatalf("first answer %v", first)
	}

	// Swap in a plugin that passes its checks and traps in service.
	goodHash := s.s.Version().Hash
	install(wasmbuild.Bytes(t, "strategy/testdata/plugins/selftestonly"))
	deadline := time.Now().Add(8 * time.Minute) // a compile under the race detector on a loaded machine
	for s.s.Version().Hash == goodHash {
		if time.Now().After(deadline) {
			t.Fatal("the trapping plugin was not loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A fresh copy of mqAll, as the next rebalance builds: the answer is in its pointers.
	fresh := make([]*primitive.MessageQueue, len(mqAll))
	for i, q := range mqAll {
		c := *q
		fresh[i] = &c
	}
	got := s.Allocate("CG", cidAll[1], fresh, cidAll)
	if got == nil || len(got) != len(first) {
		t.Fatalf("after a trap: %v, want the last good answer %v", got, first)
	}
	for i := range got {
		if *got[i] != *first[i] || got[i] != fresh[indexOf(fresh, first[i])] {
			t.Fatalf("after a trap: %v, want %v from the caller's mqAll", got, first)
		}
	}
	if failures.Load() == 0 {
		t.Fatal("the failure was not reported")
	}
	// A queue gone from mqAll is gone from the kept answer.
	shorter := fresh[:indexOf(fresh, first[len(first)-1])]
	if got := s.Allocate("CG", cidAll[1], shorter, cidAll); got == nil || len(got) != len(first)-1 {
		t.Fatalf("with a queue gone: %v, want %d queues", got, len(first)-1)
	}
	// A nil entry in mqAll is an error, not a panic.
	broken := append([]*primitive.MessageQueue{}, fresh...)
	broken[0] = nil
	if got := s.Allocate("CG", cidAll[1], broken, cidAll); got == nil {
		t.Fatal("a nil queue made Allocate return nil")
	}
	// The whole group was computed with the first call, so another consumer of it gets its
	// own last good answer.
	if got, want := s.Allocate("CG", cidAll[2], fresh, cidAll), consumer.AllocateByAveragely("CG", cidAll[2], mqAll, cidAll); len(got) != len(want) || len(got) == 0 || *got[0] != *want[0] {
		t.Fatalf("another consumer after a trap: %v, want its last good answer %v", got, want)
	}
	// A consumer with no good answer yet (new to the group) gets an empty list, not nil.
	joined := append([]string{"10.9.9.9@1"}, cidAll...)
	if got := s.Allocate("CG", "10.9.9.9@1", fresh, joined); got == nil || len(got) != 0 {
		t.Fatalf("no good answer yet: %v, want an empty list", got)
	}
}

// goConsistentHash runs rocketmq-client-go's consistent hash, which panics (an integer divide by
// zero in stathat.com/c/consistent) with 0 virtual nodes.
func goConsistentHash(vnodes int, group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) (out []*primitive.MessageQueue, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return consumer.AllocateByConsistentHash(vnodes)(group, cid, mqAll, cidAll), false
}

func indexOf(mqs []*primitive.MessageQueue, q *primitive.MessageQueue) int {
	for i, m := range mqs {
		if m != nil && *m == *q {
			return i
		}
	}
	return -1
}

// A push consumer takes the adapter and starts, and its rebalance runs up to the point where it
// needs a broker. There is no RocketMQ broker to be had here, so the test goes as far as a client
// goes without one: construction, subscription, Start, the topic's queues handed in through the
// consumer's own UpdateTopicSubscribeInfo (what a route update does), and its own Rebalance
// entry point. That rebalance stops at findConsumerList: the group's client ids come only from a
// broker (GET_CONSUMER_LIST_BY_GROUP), so without one it returns before it calls the strategy.
// The test holds that edge where it is: the strategy is not called, the consumer keeps working,
// and the strategy answers the queues the consumer holds for a cidAll a broker would send.
func TestPushConsumerTakesTheStrategy(t *testing.T) {
	logs := &clientLog{}
	rlog.SetLogger(logs)
	s := open(t, "averagely", Config{})
	var calls atomic.Int64
	counting := func(group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
		calls.Add(1)
		return s.Allocate(group, cid, mqAll, cidAll)
	}
	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName("allocd-adapter-test"),
		consumer.WithNameServer(primitive.NamesrvAddr{"127.0.0.1:1"}),
		consumer.WithStrategy(counting),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("TopicTest", consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Without a name server the client stops at the topic's route, past the strategy.
	if err := c.Start(); err != nil && !strings.Contains(err.Error(), "route") {
		t.Fatalf("Start: %v, want it to stop only at the missing route", err)
	}
	var mqAll []*primitive.MessageQueue
	for id := range 8 {
		mqAll = append(mqAll, &primitive.MessageQueue{Topic: "TopicTest", BrokerName: "broker-a", QueueId: id})
	}
	c.UpdateTopicSubscribeInfo("TopicTest", mqAll)
	if !c.IsSubscribeTopicNeedUpdate("TopicTest") {
		// The consumer holds the queues now: a route update would not be needed for them.
		c.Rebalance()
	} else {
		t.Fatal("the consumer did not take the topic's queues")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the rebalance called the strategy %d times without a broker: the edge moved, extend this test", n)
	}
	if !logs.has("do balance in group failed, get consumer id list failed", "TopicTest") {
		t.Fatalf("the rebalance did not stop at the consumer list; the client logged %q", logs.all())
	}
	// What the rebalance would do next, with the client ids a broker would answer.
	cidAll := []string{"10.0.0.1@1", "10.0.0.2@1"}
	if got, want := counting("allocd-adapter-test", cidAll[1], mqAll, cidAll), consumer.AllocateByAveragely("allocd-adapter-test", cidAll[1], mqAll, cidAll); !same(got, want) {
		t.Fatalf("strategy %v, want %v", got, want)
	}
	if err := c.Shutdown(); err != nil {
		t.Logf("Shutdown: %v", err)
	}
}

// clientLog records rocketmq-client-go's log lines (warnings and errors) for a test to read.
type clientLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *clientLog) add(msg string, fields map[string]any) {
	topic, _ := fields[rlog.LogKeyTopic].(string)
	l.mu.Lock()
	l.lines = append(l.lines, msg+" topic="+topic)
	l.mu.Unlock()
}

func (l *clientLog) has(msg, topic string) bool { return slices.Contains(l.all(), msg+" topic="+topic) }

func (l *clientLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func (l *clientLog) Debug(string, map[string]any)         {}
func (l *clientLog) Info(string, map[string]any)          {}
func (l *clientLog) Warning(msg string, f map[string]any) { l.add(msg, f) }
func (l *clientLog) Error(msg string, f map[string]any)   { l.add(msg, f) }
func (l *clientLog) Fatal(msg string, f map[string]any)   { l.add(msg, f) }
func (l *clientLog) Level(string)                         {}
func (l *clientLog) OutputPath(string) error              { return nil }
