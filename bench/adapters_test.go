package bench

// The client adapters against the clients' own built-ins, side by side on the same input:
//
//	cd bench && go test -run '^$' -bench 'Kafka|RocketMQ' -count 6 . > /tmp/adapters.txt
//
// Kafka: one leader's plan for 64 members and 1,024 partitions (one topic), through the adapter
// with allocd plugins and through franz-go's CooperativeStickyBalancer; "fresh" is the first
// plan (nobody owns anything), "steady" a rebalance where every member owns its partitions of
// the previous plan and one member has left.
//
// RocketMQ: one rebalance of a 64-consumer group on 1,024 queues (4 brokers) is 64 Allocate calls
// with the same mqAll and cidAll, one per consumer; in a fleet each process makes one of them.
// The adapter computes the whole group in one plugin call and answers the others from it; the
// input changes at every iteration (another consumer id set), so each iteration pays that call.
// "one-call" is a single consumer's call after a change, the cost one process pays.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/adapters/kafka"
	"github.com/allocd/allocd/adapters/rocketmq"
	"github.com/allocd/allocd/internal/wasmbuild"
)

var adapterCache = filepath.Join(os.TempDir(), "allocd-bench-cache")

// cpuTime is the process's user and system CPU time so far. The benchmarks report it per
// operation (cpu-ns/op) beside the wall time: on a shared machine under load the wall time
// mostly measures the wait for a core, the CPU time much less so.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs op b.N times and reports its CPU time per operation.
func loop(b *testing.B, op func()) {
	start := cpuTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

const (
	kafkaMembers    = 64
	kafkaPartitions = 1024
)

// kafkaMembersOf builds the JoinGroup members as the leader receives them from bal's members,
// owning what plan gives them (nil: nothing).
func kafkaMembersOf(bal kgo.GroupBalancer, n int, owned map[string][]int32) []kmsg.JoinGroupResponseMember {
	members := make([]kmsg.JoinGroupResponseMember, n)
	for i := range members {
		id := fmt.Sprintf("member-%02d", i)
		var cur map[string][]int32
		if ps, ok := owned[id]; ok {
			cur = map[string][]int32{"t": ps}
		}
		members[i] = kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: bal.JoinGroupMetadata([]string{"t"}, cur, 1)}
	}
	return members
}

func balance(tb testing.TB, bal kgo.GroupBalancer, members []kmsg.JoinGroupResponseMember) map[string][]int32 {
	mb, _, err := bal.MemberBalancer(members)
	if err != nil {
		tb.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"t": kafkaPartitions})
	if err != nil {
		tb.Fatal(err)
	}
	plan := into.IntoSyncAssignment()
	out := map[string][]int32{}
	total := 0
	for _, a := range plan {
		var m kmsg.ConsumerMemberAssignment
		if err := m.ReadFrom(a.MemberAssignment); err != nil {
			tb.Fatal(err)
		}
		for _, t := range m.Topics {
			out[a.MemberID] = append(out[a.MemberID], t.Partitions...)
			total += len(t.Partitions)
		}
	}
	if len(members) == kafkaMembers && total != kafkaPartitions {
		tb.Fatalf("plan covers %d of %d partitions", total, kafkaPartitions)
	}
	return out
}

func BenchmarkKafkaPlan64x1024(b *testing.B) {
	balancers := []struct {
		name string
		bal  func(b *testing.B) kgo.GroupBalancer
	}{
		{"franz-go-cooperative-sticky", func(*testing.B) kgo.GroupBalancer { return kgo.CooperativeStickyBalancer() }},
	}
	for _, p := range []string{"sticky", "averagely"} {
		balancers = append(balancers, struct {
			name string
			bal  func(b *testing.B) kgo.GroupBalancer
		}{"allocd-" + p, func(b *testing.B) kgo.GroupBalancer {
			bal, err := kafka.NewBalancer(context.Background(), kafka.Config{PluginFile: wasmbuild.Plugin(b, p), CacheDir: adapterCache})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { bal.Close() })
			return bal
		}})
	}
	for _, c := range balancers {
		bal := c.bal(b)
		fresh := kafkaMembersOf(bal, kafkaMembers, nil)
		prev := balance(b, bal, fresh)
		// Steady: the same plan is owned, and the last member has left.
		steady := kafkaMembersOf(bal, kafkaMembers, prev)[:kafkaMembers-1]
		b.Run(c.name+"/fresh", func(b *testing.B) { loop(b, func() { balance(b, bal, fresh) }) })
		b.Run(c.name+"/steady", func(b *testing.B) { loop(b, func() { balance(b, bal, steady) }) })
	}
}

// rocketmqInput is one topic's mqAll (1,024 queues on 4 brokers) and two cidAll of 64 client ids
// that differ by one consumer, for alternating rebalances.
func rocketmqInput() ([]*primitive.MessageQueue, [2][]string) {
	var mqAll []*primitive.MessageQueue
	for b := range 4 {
		broker := fmt.Sprintf("broker-%c", 'a'+b) // one string per broker, as the client's route data has it
		for q := range 256 {
			mqAll = append(mqAll, &primitive.MessageQueue{Topic: "TopicTest", BrokerName: broker, QueueId: q})
		}
	}
	var cids [2][]string
	for v := range cids {
		for i := range 64 {
			cids[v] = append(cids[v], fmt.Sprintf("10.0.%d.%d@%d", v, i, 4000+i))
		}
		slices.Sort(cids[v]) // as the client's rebalance sorts cidAll before it asks
	}
	return mqAll, cids
}

func BenchmarkRocketMQRebalance64(b *testing.B) {
	mqAll, cids := rocketmqInput()
	peers := []struct {
		plugin  string
		builtin consumer.AllocateStrategy
	}{
		{"averagely", consumer.AllocateByAveragely},
		{"circle", consumer.AllocateByAveragelyCircle},
		{"hash", consumer.AllocateByConsistentHash(10)},
	}
	for _, p := range peers {
		cfg := rocketmq.Config{
			PluginFile: wasmbuild.Plugin(b, p.plugin), CacheDir: adapterCache, Config: map[string]string{"vnodes": "10"},
		}
		if os.Getenv("ALLOCD_BENCH_WASM") != "" {
			cfg.Timeout = 10 * time.Minute // scripts/callgrind.sh: some 50x slower under valgrind
		}
		s, err := rocketmq.NewStrategy(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		run := func(name string, fn consumer.AllocateStrategy, calls int) {
			b.Run(name, func(b *testing.B) {
				n := 0
				loop(b, func() {
					cidAll := cids[n%2]
					n++
					for _, cid := range cidAll[:calls] {
						if len(fn("CG", cid, mqAll, cidAll)) == 0 {
							b.Fatal("no queues")
						}
					}
				})
			})
		}
		run("allocd-"+p.plugin+"/64-calls", s.Allocate, 64)
		run("client-"+p.plugin+"/64-calls", p.builtin, 64)
		run("allocd-"+p.plugin+"/one-call", s.Allocate, 1)
		run("client-"+p.plugin+"/one-call", p.builtin, 1)
	}
}
