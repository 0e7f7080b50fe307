package lock_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/allocd/allocd/lock"
)

// generation is a daemon's view of one queue-based group.
type generation struct {
	members []string
	owners  map[lock.Queue]string
}

func (g generation) Group(group string) (lock.GroupConfig, bool) {
	return lock.GroupConfig{Kind: lock.KindQueue}, group == "orders"
}
func (g generation) Members(string) []string             { return g.members }
func (g generation) Owner(_ string, q lock.Queue) string { return g.owners[q] }

// The daemon drives the Table: it passes the time in, persists the snapshot
// before answering whenever Version changed, and restores it after a restart.
func Example() {
	q0 := lock.Queue{Topic: "T", BrokerName: "b", QueueID: 0}
	gen := generation{members: []string{"c1", "c2"}, owners: map[lock.Queue]string{q0: "c1"}}
	t, err := lock.New(lock.Config{Directory: gen})
	if err != nil {
		panic(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	var disk []byte
	persist := func(before uint64) {
		if t.Version() != before {
			disk, _ = json.Marshal(t.Snapshot()) // and fsync, before replying
		}
	}

	v := t.Version()
	locked, _, _ := t.LockQueues(now, "orders", "c1", []lock.Queue{q0}, 0)
	persist(v)
	fmt.Println("c1 holds", locked[0].Lock, "with token", locked[0].Token)

	// The daemon restarts, and the queue moves to c2 meanwhile.
	var s lock.Snapshot
	_ = json.Unmarshal(disk, &s)
	gen.owners[q0] = "c2"
	t, _ = lock.New(lock.Config{Directory: gen})
	if err := t.Restore(s); err != nil {
		panic(err)
	}
	_, refused, _ := t.LockQueues(now.Add(10*time.Second), "orders", "c2", []lock.Queue{q0}, 0)
	fmt.Println("c2:", refused[0].Reason, "by", refused[0].Holder)

	// c1 unlocks; c2 gets the queue with a larger token, and c1's is stale.
	_, _ = t.UnlockQueues(now.Add(11*time.Second), "orders", "c1", []lock.Queue{q0})
	locked, _, _ = t.LockQueues(now.Add(11*time.Second), "orders", "c2", []lock.Queue{q0}, 0)
	fmt.Println("c2 holds", locked[0].Lock, "with token", locked[0].Token)
	fmt.Println(t.Check(now.Add(12*time.Second), "orders", lock.QueueLock(q0), 1))
	// Output:
	// c1 holds queue T/b/0 with token 1
	// c2: held by c1
	// c2 holds queue T/b/0 with token 2
	// lock: token 1 for queue T/b/0 in group "orders" is stale: held by c2 with token 2
}
