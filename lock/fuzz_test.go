package lock

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzRestore feeds arbitrary bytes to the snapshot decoder and Restore. A
// snapshot Restore accepts must survive a round trip unchanged (apart from
// the free, uncounted locks Snapshot leaves out), and the Table restored from
// it must only ever issue tokens above the snapshot's lastToken.
func FuzzRestore(f *testing.F) {
	f.Add([]byte(`{"clock":"2025-01-01T00:00:02Z","lastToken":4,"locks":[` +
		`{"group":"m","lock":{"kind":"messageGroup","messageGroup":{"topic":"T","messageGroup":"order-1"}},"holder":"c2","token":4,"expires":"2025-01-01T00:00:32Z","failures":1},` +
		`{"group":"q","lock":{"kind":"queue","queue":{"topic":"T","brokerName":"b","queueId":0}},"holder":"c1","token":1,"expires":"2025-01-01T00:01:00Z"}]}`))
	f.Add([]byte(`{"clock":"2025-01-01T01:59:59Z","lastToken":7,"locks":[{"group":"g","lock":{"kind":"messageGroup","messageGroup":{"topic":"T","messageGroup":"order-3"}},"failures":1,"idleSince":"2025-01-01T01:00:00Z"}]}`))
	f.Add([]byte(`{"lastToken":0,"locks":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		d := newFakeDirectory()
		d.groups["q"] = GroupConfig{Kind: KindQueue}
		d.groups["m"] = GroupConfig{Kind: KindMessageGroup}
		d.members["q"], d.members["m"] = []string{"c1"}, []string{"c1"}
		d.owners["q"] = map[Queue]string{{Topic: "T", BrokerName: "b", QueueID: 0}: "c1"}
		tb, err := New(Config{Directory: d})
		if err != nil {
			t.Fatal(err)
		}
		if tb.Restore(s) != nil {
			return
		}
		again := tb.Snapshot()
		tb2, _ := New(Config{Directory: d})
		if err := tb2.Restore(again); err != nil {
			t.Fatalf("a Table's own snapshot does not restore: %v", err)
		}
		if !reflect.DeepEqual(tb2.Snapshot(), again) {
			t.Fatalf("snapshot changed on a round trip:\n%+v\n%+v", again, tb2.Snapshot())
		}
		now := tb.clock.Add(DefaultLease + MaxLease)
		locked, _, err := tb.LockQueues(now, "q", "c1", []Queue{{Topic: "T", BrokerName: "b", QueueID: 0}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range locked {
			if !g.Renewed && g.Token <= s.LastToken {
				t.Fatalf("token %d issued after restoring lastToken %d", g.Token, s.LastToken)
			}
		}
		g, _, err := tb.LockMessageGroup(now, "m", "c1", MessageGroup{Topic: "T", Name: "order-1"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if g.Token != 0 && !g.Renewed && g.Token <= s.LastToken {
			t.Fatalf("token %d issued after restoring lastToken %d", g.Token, s.LastToken)
		}
	})
}
