package kafka

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// A member's join metadata carries its topics, owned partitions, generation, labels (user
// data) and its zone as its rack, and the leader reads them back as the plugin's input.
func TestJoinGroupMetadataCarriesTheMember(t *testing.T) {
	b, err := NewBalancer(context.Background(), Config{PluginFile: wasmbuild.Plugin(t, "averagely"), CacheDir: cacheDir,
		Labels: map[string]string{"zone": "eu-1a", "weight": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	raw := b.JoinGroupMetadata([]string{"orders"}, map[string][]int32{"orders": {3, 1}}, 7)
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if meta.Version != 3 || !slices.Equal(meta.Topics, []string{"orders"}) || meta.Generation != 7 ||
		meta.Rack == nil || *meta.Rack != "eu-1a" || len(meta.OwnedPartitions) != 1 {
		t.Fatalf("metadata %+v", meta)
	}
	id := "static-1"
	cb, _, err := b.MemberBalancer([]kmsg.JoinGroupResponseMember{{MemberID: "m", InstanceID: &id, ProtocolMetadata: raw}})
	if err != nil {
		t.Fatal(err)
	}
	v := b.view(cb.(*kgo.ConsumerBalancer), map[string]int32{"orders": 4})
	members := v.members
	if len(members) != 1 || members[0].id != "static-1" || members[0].labels["zone"] != "eu-1a" ||
		members[0].labels["weight"] != "2" || members[0].labels["instanceId"] != "static-1" {
		t.Fatalf("members %+v", members)
	}
	o3, ok3 := v.prevOwner("orders", 3)
	o1, ok1 := v.prevOwner("orders", 1)
	if _, ok0 := v.prevOwner("orders", 0); o3 != 0 || !ok3 || o1 != 0 || !ok1 || ok0 || members[0].gen != 7 {
		t.Fatalf("owners %v, generation %d", v.prev, members[0].gen)
	}
}

// prevOwner is topic/p's current owner, if it has one.
func (g *view) prevOwner(topic string, p int32) (int, bool) {
	t, ok := g.index[topic]
	if !ok || p < 0 || p >= g.counts[t] || g.prev[t][p] < 0 {
		return 0, false
	}
	return int(g.prev[t][p]), true
}
