package etcdstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/allocd/allocd/internal/etcdtest"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/store/etcdstore"
	"github.com/allocd/allocd/store/storetest"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func open(t testing.TB, cli *clientv3.Client, opts etcdstore.Options) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.Open(ctx(t), cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// leaderKey puts key (if absent) and fences s with it: a stand-in for an election won.
func leaderKey(t testing.TB, cli *clientv3.Client, s *etcdstore.Store, key string) {
	t.Helper()
	if _, err := cli.Txn(ctx(t)).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, "me")).Commit(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx(t), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("leader key: %v", err)
	}
	s.SetFence(key, resp.Kvs[0].CreateRevision)
}

// openLeader opens a store under prefix that holds the fence prefix+"leader".
func openLeader(t testing.TB, cli *clientv3.Client, prefix string) *etcdstore.Store {
	s := open(t, cli, etcdstore.Options{Prefix: prefix})
	leaderKey(t, cli, s, prefix+"leader")
	return s
}

// The store behaves as the bbolt file does: the shared suite, each test under a prefix of
// its own on one etcd.
func TestShared(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	n := 0
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) storetest.Store {
			n++
			return openLeader(t, cli, fmt.Sprintf("/suite%d/", n))
		},
		Reopen: func(t *testing.T, s storetest.Store) storetest.Store {
			return openLeader(t, cli, s.(*etcdstore.Store).Prefix())
		},
	})
}

func campaign(t *testing.T, cli *clientv3.Client, pfx, val string) (*concurrency.Session, *concurrency.Election) {
	t.Helper()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	el := concurrency.NewElection(sess, pfx)
	if err := el.Campaign(ctx(t), val); err != nil {
		t.Fatal(err)
	}
	return sess, el
}

func nextSeq(s *etcdstore.Store) (uint64, error) {
	var n uint64
	err := s.Update(func(tx store.Tx) (err error) {
		n, err = tx.NextSequence("tokens")
		return err
	})
	return n, err
}

// A leader whose session is lost (its lease revoked, as on expiry) and replaced by another
// writes nothing more: its writes fail with ErrFenced and call OnFenced, once per write.
// Fencing tokens from NextSequence keep growing across the two leaders.
func TestFence(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	const pfx = "/allocd/election"

	var mu sync.Mutex
	var fenced []error
	var s1 *etcdstore.Store
	s1 = open(t, cli, etcdstore.Options{OnFenced: func(err error) {
		mu.Lock()
		fenced = append(fenced, err)
		first := len(fenced) == 1
		mu.Unlock()
		// A step-down may write (it fails, fenced, and is reported too) without deadlocking.
		if first {
			if err := s1.PutGroup(store.Group{Name: "from-callback"}); !errors.Is(err, store.ErrFenced) {
				t.Errorf("write from OnFenced: %v", err)
			}
		}
	}})
	// No fence yet: a follower writes nothing, and is not told to step down.
	if err := s1.PutTopic(store.Topic{Name: "T0"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write with no fence: %v", err)
	}
	sess1, el1 := campaign(t, cli, pfx, "one")
	s1.SetFence(el1.Key(), el1.Rev())
	for want := uint64(1); want <= 3; want++ {
		if n, err := nextSeq(s1); err != nil || n != want {
			t.Fatalf("leader 1 sequence %d, %v; want %d", n, err, want)
		}
	}
	if err := s1.PutTopic(store.Topic{Name: "T1"}); err != nil {
		t.Fatal(err)
	}

	if _, err := cli.Revoke(ctx(t), sess1.Lease()); err != nil {
		t.Fatal(err)
	}
	_, el2 := campaign(t, cli, pfx, "two")
	s2 := open(t, cli, etcdstore.Options{})
	s2.SetFence(el2.Key(), el2.Rev())

	before, err := cli.Get(ctx(t), "/allocd/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]func() error{
		"PutTopic":    func() error { return s1.PutTopic(store.Topic{Name: "T2"}) },
		"DeleteTopic": func() error { return s1.DeleteTopic("T1") },
		"PutGroup":    func() error { return s1.PutGroup(store.Group{Name: "g"}) },
		"NextSequence": func() error {
			_, err := nextSeq(s1)
			return err
		},
		"PutGenerations": func() error { return s1.PutGenerations(store.Generation{Group: "g", Topic: "T1", Number: 9}) },
	}
	for name, w := range writes {
		err := w()
		if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), el1.Key()) {
			t.Errorf("%s by the old leader: %v, want ErrFenced naming its key", name, err)
		}
	}
	mu.Lock()
	if len(fenced) != len(writes)+1 || !errors.Is(fenced[0], store.ErrFenced) {
		t.Errorf("OnFenced called %d times (%v) for %d fenced writes", len(fenced), fenced, len(writes)+1)
	}
	mu.Unlock()
	after, err := cli.Get(ctx(t), "/allocd/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// The election keys live under /allocd/election: only the new leader's was added.
	if len(after.Kvs) != len(before.Kvs) || after.Header.Revision != before.Header.Revision {
		t.Errorf("fenced writes changed etcd: revision %d -> %d", before.Header.Revision, after.Header.Revision)
	}

	if n, err := nextSeq(s2); err != nil || n != 4 {
		t.Fatalf("leader 2's first sequence %d, %v; want 4", n, err)
	}
	if _, err := s2.GetTopic("T1"); err != nil {
		t.Fatalf("leader 2 reads leader 1's topic: %v", err)
	}
	s2.ClearFence()
	if err := s2.PutTopic(store.Topic{Name: "T3"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write after ClearFence: %v", err)
	}
	mu.Lock()
	if len(fenced) != len(writes)+1 {
		t.Errorf("OnFenced called for a store without a fence")
	}
	mu.Unlock()
}

// Something outside the store changes what a write read between its read and its commit: the
// commit's compare fails and the write runs again on what is there now.
func TestReadChangedUnderWrite(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	s := openLeader(t, cli, "/allocd/")
	for _, c := range []struct {
		name   string
		read   func(tx store.Tx) (string, error)
		meddle string // key put from outside during the first run
	}{
		{"get", func(tx store.Tx) (string, error) {
			v, _, err := tx.Get("b", "k")
			return string(v), err
		}, "/allocd/buckets/b/k"},
		{"list", func(tx store.Tx) (string, error) {
			var keys []string
			err := tx.List("c", "", func(k string, _ []byte) error { keys = append(keys, k); return nil })
			return strings.Join(keys, ","), err
		}, "/allocd/buckets/c/new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen []string
			err := s.Update(func(tx store.Tx) error {
				v, err := c.read(tx)
				if err != nil {
					return err
				}
				seen = append(seen, v)
				if len(seen) == 1 {
					if _, err := cli.Put(ctx(t), c.meddle, "outside"); err != nil {
						return err
					}
				}
				return tx.Put("out", c.name, []byte(v))
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 2 || seen[0] == seen[1] {
				t.Fatalf("runs saw %q; want two runs, the second seeing the outside write", seen)
			}
			var got []byte
			s.View(func(tx store.Tx) (err error) { got, _, err = tx.Get("out", c.name); return err })
			if string(got) != seen[1] {
				t.Fatalf("committed %q, want the second run's %q", got, seen[1])
			}
		})
	}
}

// etcd stopped: calls fail within the request timeout with an error saying etcd did not answer;
// after etcd is back they work again, and what was written before is there.
func TestEtcdUnavailable(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	s := open(t, cli, etcdstore.Options{RequestTimeout: time.Second})
	leaderKey(t, cli, s, "/allocd/leader")
	if err := s.PutTopic(store.Topic{Name: "T"}); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	for name, call := range map[string]func() error{
		"put":  func() error { return s.PutTopic(store.Topic{Name: "U"}) },
		"get":  func() error { _, err := s.GetTopic("T"); return err },
		"list": func() error { _, err := s.ListGroups(); return err },
		"view": func() error { return s.View(func(tx store.Tx) error { _, _, err := tx.Get("b", "k"); return err }) },
	} {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "did not answer within 1s") {
			t.Errorf("%s with etcd stopped: %v", name, err)
		}
		if took > 3*time.Second {
			t.Errorf("%s with etcd stopped took %v, the timeout is 1s", name, took)
		}
		if name == "put" && !strings.Contains(err.Error(), "may or may not have been applied") {
			t.Errorf("a write's timeout does not say its outcome is unknown: %v", err)
		}
	}
	e.Start()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = s.PutTopic(store.Topic{Name: "U"}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("etcd back, but a write still fails: %v", err)
	}
	ts, err := s.ListTopics()
	if err != nil || len(ts) != 2 {
		t.Fatalf("after etcd came back: %+v, %v", ts, err)
	}
}

// A write that cannot fit in one etcd transaction is refused with a clear error, at once, and
// writes nothing, whether the store's own check or etcd refuses it.
func TestTooLarge(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	s := openLeader(t, cli, "/allocd/")
	big := store.Topic{Name: "big"}
	for i := range 20000 {
		big.Brokers = append(big.Brokers, store.Broker{Name: fmt.Sprintf("broker-%060d", i), ReadQueues: 1, WriteQueues: 1})
	}
	many := make([]store.Generation, 200)
	for i := range many {
		many[i] = store.Generation{Group: "g", Topic: fmt.Sprintf("T%d", i)}
	}
	for name, c := range map[string]struct {
		write func() error
		want  string
	}{
		"bytes": {func() error { return s.PutTopic(big) }, "--max-request-bytes"},
		"ops":   {func() error { return s.PutGenerations(many...) }, "200 writes"},
	} {
		start := time.Now()
		err := c.write()
		if !errors.Is(err, etcdstore.ErrTooLarge) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was written") {
			t.Errorf("%s: %v", name, err)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s: refused after %v", name, time.Since(start))
		}
	}
	// A store told etcd takes more than it does: etcd refuses, and the error says so.
	loose := open(t, cli, etcdstore.Options{MaxRequestBytes: 64 << 20})
	leaderKey(t, cli, loose, "/allocd/leader")
	mid := store.Topic{Name: "mid", Brokers: big.Brokers[:15000]}
	if b, _ := json.Marshal(mid); len(b) < 3<<19 || len(b) > 2<<20 {
		t.Fatalf("the topic is %d bytes, not between etcd's 1.5 MiB and the client's 2 MiB", len(b))
	}
	if err := loose.PutTopic(mid); !errors.Is(err, etcdstore.ErrTooLarge) {
		t.Errorf("a request etcd refuses: %v", err)
	} else {
		t.Log(err)
	}
	if ts, err := s.ListTopics(); err != nil || len(ts) != 0 {
		t.Fatalf("refused writes left %d topics, %v", len(ts), err)
	}
	if gs, err := s.ListGenerations(); err != nil || len(gs) != 0 {
		t.Fatalf("refused writes left %d generations, %v", len(gs), err)
	}
}

// A damaged record (not what allocd wrote) gives an error naming its key, not a panic or a
// silently empty record.
func TestDamagedRecord(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	s := openLeader(t, cli, "/allocd/")
	for k, v := range map[string]string{
		"/allocd/topics/T":           "{garbage",
		"/allocd/groups/g":           `{"name": 7}`,
		"/allocd/generations/g\x00T": "[]",
		"/allocd/seq/tokens":         "twelve",
	} {
		if _, err := cli.Put(ctx(t), k, v); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, err error, key string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("%s of a damaged record: %v, want an error naming %q", what, err, key)
		}
	}
	_, err := s.GetTopic("T")
	check("GetTopic", err, "/allocd/topics/T")
	_, err = s.ListTopics()
	check("ListTopics", err, "/allocd/topics/T")
	_, err = s.GetGroup("g")
	check("GetGroup", err, "/allocd/groups/g")
	_, err = s.ListGenerations()
	check("ListGenerations", err, "/allocd/generations/g\x00T")
	_, err = nextSeq(s)
	check("NextSequence", err, "/allocd/seq/tokens")

	if _, err := cli.Put(ctx(t), "/other/meta/schema", "99"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdstore.Open(ctx(t), cli, etcdstore.Options{Prefix: "/other"}); err == nil || !strings.Contains(err.Error(), `schema version "99"`) {
		t.Errorf("Open of a newer schema: %v", err)
	}
	// An older schema (1: history records in one key) opens, and the current one is written
	// over it, so that an allocd reading only schema 1 refuses the records written from now on.
	if _, err := cli.Put(ctx(t), "/old/meta/schema", "1"); err != nil {
		t.Fatal(err)
	}
	old, err := etcdstore.Open(ctx(t), cli, etcdstore.Options{Prefix: "/old"})
	if err != nil {
		t.Fatalf("Open of schema 1: %v", err)
	}
	if n := old.UpgradedFrom(); n != 1 {
		t.Errorf("Open of schema 1 says it upgraded from %d, want 1", n)
	}
	old.Close()
	if resp, err := cli.Get(ctx(t), "/old/meta/schema"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Errorf("schema after opening a schema 1 prefix: %v, %v; want 2", resp, err)
	}
}

// Writers in many goroutines: every sequence number is handed out once, and every write lands.
func TestConcurrentWriters(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	s := openLeader(t, cli, "/allocd/")
	const workers, each = 6, 15
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n, err := nextSeq(s)
				if err == nil {
					err = s.PutTopic(store.Topic{Name: fmt.Sprintf("T%d-%d", w, i)})
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[n] {
					t.Errorf("sequence %d handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ts, err := s.ListTopics()
	if err != nil || len(ts) != workers*each || len(seen) != workers*each {
		t.Fatalf("%d topics (%v), %d sequence numbers; want %d", len(ts), err, len(seen), workers*each)
	}
	for n := uint64(1); n <= workers*each; n++ {
		if !seen[n] {
			t.Fatalf("sequence %d skipped", n)
		}
	}
}

// A put under a range deleted earlier in the same transaction (etcd refuses a put inside a
// deleted range in one Txn): the range becomes deletes of the keys it held, and the put lands.
func TestPutInsideDeletedRange(t *testing.T) {
	e := etcdtest.Start(t)
	s := openLeader(t, e.Client(t), "/allocd/")
	err := s.Update(func(tx store.Tx) error {
		for n := int64(1); n <= 3; n++ {
			if err := tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", n), []byte("{}")); err != nil {
				return err
			}
		}
		return tx.Put(store.HistoryBucket, store.HistoryKey("h", "T", 1), []byte("{}"))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx store.Tx) error {
		if err := store.DeleteHistory(tx, "g"); err != nil {
			return err
		}
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 9), []byte("{}"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	s.View(func(tx store.Tx) error {
		return tx.List(store.HistoryBucket, "", func(k string, _ []byte) error { keys = append(keys, k); return nil })
	})
	if want := []string{store.HistoryKey("g", "T", 9), store.HistoryKey("h", "T", 1)}; fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("history keys %q, want %q", keys, want)
	}
}
