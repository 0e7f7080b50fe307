package kafka

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/internal/wasmbuild"
)

var (
	fuzzOnce sync.Once
	fuzzBal  *Balancer
	fuzzErr  error
)

// FuzzJoinMetadata feeds the leader a member whose join metadata is arbitrary bytes (another
// member's client, a bug, a hostile peer): the balancer either refuses the members with an error
// or gives a plan in which every partition of every subscribed topic has exactly one owner.
func FuzzJoinMetadata(f *testing.F) {
	path := wasmbuild.Plugin(f, "averagely")
	fuzzOnce.Do(func() {
		fuzzBal, fuzzErr = NewBalancer(context.Background(), Config{PluginFile: path, CacheDir: cacheDir})
	})
	if fuzzErr != nil {
		f.Fatal(fuzzErr)
	}
	b := fuzzBal
	good := b.JoinGroupMetadata([]string{"orders"}, map[string][]int32{"orders": {0, 1}}, 3)
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:len(good)/2])
	f.Add(b.JoinGroupMetadata([]string{"orders", "payments"}, nil, -1))
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = []string{"orders"}
	meta.UserData = []byte(`{"labels":{"zone":`)
	meta.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "orders", Partitions: []int32{-1, 99, 0, 0}}}
	f.Add(meta.AppendTo(nil))
	f.Fuzz(func(t *testing.T, raw []byte) {
		members := []kmsg.JoinGroupResponseMember{
			{MemberID: "a", ProtocolMetadata: good},
			{MemberID: "b", ProtocolMetadata: raw},
		}
		mb, topics, err := b.MemberBalancer(members)
		if err != nil {
			return
		}
		parts := map[string]int32{}
		for tp := range topics {
			parts[tp] = 4
		}
		into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(parts)
		if err != nil {
			t.Fatalf("BalanceOrError: %v", err)
		}
		owner := map[string]map[int32]string{}
		for _, a := range into.IntoSyncAssignment() {
			var m kmsg.ConsumerMemberAssignment
			if err := m.ReadFrom(a.MemberAssignment); err != nil {
				t.Fatal(err)
			}
			for _, tp := range m.Topics {
				if owner[tp.Topic] == nil {
					owner[tp.Topic] = map[int32]string{}
				}
				for _, p := range tp.Partitions {
					if o, dup := owner[tp.Topic][p]; dup {
						t.Fatalf("%s/%d given to %s and %s", tp.Topic, p, o, a.MemberID)
					}
					owner[tp.Topic][p] = a.MemberID
				}
			}
		}
		// Cooperative plans hold back a partition that moves away from a member that claims it
		// (KIP-429), and a member may claim any partition, of a topic it subscribes to or not:
		// every partition nobody claims must be placed.
		type partition struct {
			topic string
			p     int32
		}
		claimed := map[partition]bool{}
		for _, m := range members {
			var meta kmsg.ConsumerMemberMetadata // read as kgo.NewConsumerBalancer reads it
			meta.Default()
			if meta.ReadFrom(m.ProtocolMetadata) == nil {
				for _, op := range meta.OwnedPartitions {
					for _, p := range op.Partitions {
						claimed[partition{op.Topic, p}] = true
					}
				}
			}
		}
		for tp, n := range parts {
			for p := range n {
				if _, ok := owner[tp][p]; !ok && !claimed[partition{tp, p}] {
					t.Fatalf("%s/%d has no owner and no member claims it: %v", tp, p, owner)
				}
			}
		}
	})
}
