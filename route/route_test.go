package route_test

import (
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/route"
)

func TestShardQueueIsJavaCompatible(t *testing.T) {
	qs := make([]abi.Queue, 8)
	for i := range qs {
		qs[i] = abi.Queue{Topic: "T", BrokerName: "b", QueueID: int32(i)}
	}
	// Java: "hello".hashCode() == 99162322, % 8 == 2. "polygenelubricants".hashCode() is
	// Integer.MIN_VALUE, % 8 == 0; % 3 == -2, made positive. "😀" is two UTF-16 units:
	// 55357*31 + 56832 == 1772899, % 8 == 3. "Aa" and "BB" collide in Java (2112).
	for key, want := range map[string]int32{"hello": 2, "polygenelubricants": 0, "😀": 3, "Aa": 0, "BB": 0, "": 0} {
		q, ok := route.ShardQueue(qs, key)
		if !ok || q.QueueID != want {
			t.Errorf("ShardQueue(%q) = %v, want queue %d", key, q, want)
		}
	}
	if q, _ := route.ShardQueue(qs[:3], "polygenelubricants"); q.QueueID != 2 {
		t.Errorf("ShardQueue over 3 queues of a MIN_VALUE hash = %d, want 2", q.QueueID)
	}
	if _, ok := route.ShardQueue(nil, "k"); ok {
		t.Error("ShardQueue over no queues succeeded")
	}
	for s, want := range map[string]int32{"hello": 99162322, "polygenelubricants": -1 << 31, "Aa": 2112, "BB": 2112} {
		if got := route.JavaHash(s); got != want {
			t.Errorf("JavaHash(%q) = %d, want %d", s, got, want)
		}
	}
}
