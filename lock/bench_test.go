package lock

import (
	"fmt"
	"testing"
	"time"
)

// benchTable returns a Table with a queue-based group q whose 16 queues are
// assigned to c1, and a message-based group m; members c1..c8 in both.
func benchTable(b *testing.B) (*Table, []Queue) {
	d := newFakeDirectory()
	d.groups["q"] = GroupConfig{Kind: KindQueue}
	d.groups["m"] = GroupConfig{Kind: KindMessageGroup}
	cids := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	d.members["q"], d.members["m"] = cids, cids
	var qs []Queue
	owners := make(map[Queue]string)
	for i := range 16 {
		q := Queue{Topic: "T", BrokerName: "b", QueueID: i}
		qs = append(qs, q)
		owners[q] = "c1"
	}
	d.owners["q"] = owners
	t, err := New(Config{Directory: d, Preference: d})
	if err != nil {
		b.Fatal(err)
	}
	return t, qs
}

// BenchmarkLockQueuesRenew is the steady state of a queue-based member: one
// call renewing its 16 queue locks.
func BenchmarkLockQueuesRenew(b *testing.B) {
	t, qs := benchTable(b)
	now := epoch
	if _, _, err := t.LockQueues(now, "q", "c1", qs, 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		now = now.Add(time.Millisecond)
		locked, _, err := t.LockQueues(now, "q", "c1", qs, 0)
		if err != nil || len(locked) != len(qs) {
			b.Fatal(locked, err)
		}
	}
}

// BenchmarkLockUnlockQueue is one grant and one unlock of a single queue.
func BenchmarkLockUnlockQueue(b *testing.B) {
	t, qs := benchTable(b)
	now := epoch
	for b.Loop() {
		now = now.Add(time.Millisecond)
		locked, _, err := t.LockQueues(now, "q", "c1", qs[:1], 0)
		if err != nil || len(locked) != 1 {
			b.Fatal(locked, err)
		}
		if _, err := t.UnlockQueues(now, "q", "c1", qs[:1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMessageGroupLockRelease is one grant and one release (done) of a
// message group, over 1024 groups.
func BenchmarkMessageGroupLockRelease(b *testing.B) {
	t, _ := benchTable(b)
	groups := make([]MessageGroup, 1024)
	for i := range groups {
		groups[i] = MessageGroup{Topic: "T", Name: fmt.Sprintf("order-%d", i)}
	}
	now := epoch
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		g := groups[i%len(groups)]
		i++
		grant, r, err := t.LockMessageGroup(now, "m", "c1", g, 0)
		if err != nil || r != nil {
			b.Fatal(r, err)
		}
		if err := t.ReleaseMessageGroup(now, "m", "c1", g, grant.Token, Done); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMessageGroupRenew is a holder renewing its message group.
func BenchmarkMessageGroupRenew(b *testing.B) {
	t, _ := benchTable(b)
	g := MessageGroup{Topic: "T", Name: "order-1"}
	now := epoch
	if _, _, err := t.LockMessageGroup(now, "m", "c1", g, 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		now = now.Add(time.Millisecond)
		if grant, r, err := t.LockMessageGroup(now, "m", "c1", g, 0); err != nil || r != nil || !grant.Renewed {
			b.Fatal(grant, r, err)
		}
	}
}

// BenchmarkCheck is a broker's fencing check of a live token.
func BenchmarkCheck(b *testing.B) {
	t, qs := benchTable(b)
	locked, _, err := t.LockQueues(epoch, "q", "c1", qs, 0)
	if err != nil {
		b.Fatal(err)
	}
	l, token := locked[3].Lock, locked[3].Token
	for b.Loop() {
		if err := t.Check(epoch, "q", l, token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot10k is what the daemon pays to capture the state it must
// persist, with 10 000 held message groups.
func BenchmarkSnapshot10k(b *testing.B) {
	t, _ := benchTable(b)
	for i := range 10_000 {
		g := MessageGroup{Topic: "T", Name: fmt.Sprintf("order-%d", i)}
		if _, r, err := t.LockMessageGroup(epoch, "m", "c1", g, 0); err != nil || r != nil {
			b.Fatal(r, err)
		}
	}
	for b.Loop() {
		if s := t.Snapshot(); len(s.Locks) != 10_000 {
			b.Fatal(len(s.Locks))
		}
	}
}
