// Package storetest is the behaviour every store.Store implementation shares (the bbolt file,
// etcd), run by each implementation's tests against a real store.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/store"
)

// Store is what the suite tests: a store with the optional one-transaction interfaces.
type Store interface {
	store.Store
	store.GenerationTx
	store.TopicTx
}

// Factory makes the stores under test.
type Factory struct {
	// New returns a new, empty store, closed by t's cleanup.
	New func(t *testing.T) Store
	// Reopen returns a new store over the data of s, which the suite has closed.
	Reopen func(t *testing.T, s Store) Store
}

// Run runs every test of the suite as a subtest of t.
func Run(t *testing.T, f Factory) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"Topics", Topics},
		{"GroupsAndGenerations", GroupsAndGenerations},
		{"BadNames", BadNames},
		{"Buckets", Buckets},
		{"Reopen", Reopen},
		{"TrimHistory", TrimHistory},
		{"TrimManyAtOnce", TrimManyAtOnce},
		{"HistoryInParts", HistoryInParts},
		{"PutGenerationsTxIsOneTransaction", PutGenerationsTxIsOneTransaction},
		{"TopicTx", TopicTx},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, f) })
	}
}

func topic(name string, read int) store.Topic {
	return store.Topic{Name: name, Brokers: []store.Broker{{Name: "broker-a", ReadQueues: read, WriteQueues: read}}}
}

// Reopen: what was written is there after a Close and a new open, the sequence goes on, and
// calls on a closed store fail.
func Reopen(t *testing.T, f Factory) {
	s := f.New(t)
	if err := s.PutTopic(topic("T", 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGroup(store.Group{Name: "g", Binding: store.Binding{Strategy: "circle"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx store.Tx) error { _, err := tx.NextSequence("tokens"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(topic("U", 1)); err == nil {
		t.Fatal("PutTopic after Close succeeded")
	}
	s = f.Reopen(t, s)
	if got, err := s.GetTopic("T"); err != nil || !reflect.DeepEqual(got, topic("T", 4)) {
		t.Fatalf("after reopen GetTopic = %+v, %v", got, err)
	}
	if g, err := s.GetGroup("g"); err != nil || g.Strategy != "circle" {
		t.Fatalf("after reopen GetGroup = %+v, %v", g, err)
	}
	err := s.Update(func(tx store.Tx) error {
		n, err := tx.NextSequence("tokens")
		if n != 2 {
			return fmt.Errorf("sequence after reopen %d, want 2", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func Topics(t *testing.T, f Factory) {
	s := f.New(t)
	if _, err := s.GetTopic("T"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTopic of an absent topic: %v, want ErrNotFound", err)
	}
	for _, name := range []string{"T2", "T1", "T3"} {
		if err := s.PutTopic(topic(name, 4)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTopic(topic("T1", 8)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTopic("T1")
	if err != nil || !reflect.DeepEqual(got, topic("T1", 8)) {
		t.Fatalf("GetTopic(T1) = %+v, %v", got, err)
	}
	if err := s.DeleteTopic("T2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTopic("T2"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"T2"`) {
		t.Fatalf("second DeleteTopic: %v, want ErrNotFound naming T2", err)
	}
	list, err := s.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Topic{topic("T1", 8), topic("T3", 4)}; !reflect.DeepEqual(list, want) {
		t.Fatalf("ListTopics = %+v, want %+v", list, want)
	}
}

func GroupsAndGenerations(t *testing.T, f Factory) {
	s := f.New(t)
	g := store.Group{Name: "g", Binding: store.Binding{Strategy: "hash", Config: map[string]string{"vnodes": "10"}, Model: store.Clustering, Delivery: store.QueueDelivery}}
	if err := s.PutGroup(g); err != nil {
		t.Fatal(err)
	}
	// "g" is a prefix of "g2": deleting g must not touch g2's generations.
	if err := s.PutGroup(store.Group{Name: "g2", Binding: store.Binding{Strategy: "averagely"}}); err != nil {
		t.Fatal(err)
	}
	q := abi.Queue{Topic: "T", BrokerName: "b", QueueID: 1}
	gens := []store.Generation{
		{Group: "g", Topic: "T", Number: 3, Assignment: map[string][]abi.Queue{"c1": {q}}, CIDs: map[string]string{"c1": "c1"}, Inputs: "x", At: time.Unix(100, 0).UTC()},
		{Group: "g", Topic: "U", Number: 1},
		{Group: "g2", Topic: "T", Number: 7},
	}
	if err := s.PutGenerations(gens...); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListGenerations()
	if err != nil || !reflect.DeepEqual(got, gens) {
		t.Fatalf("ListGenerations = %+v, %v; want %+v", got, err, gens)
	}
	gg, err := s.GetGroup("g")
	if err != nil || !reflect.DeepEqual(gg, g) {
		t.Fatalf("GetGroup = %+v, %v", gg, err)
	}
	if err := s.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ListGenerations()
	if len(got) != 1 || got[0].Group != "g2" {
		t.Fatalf("after DeleteGroup(g), generations %+v, want only g2's", got)
	}
	if err := s.DeleteGroup("g"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteGroup: %v", err)
	}
	groups, _ := s.ListGroups()
	if len(groups) != 1 || groups[0].Name != "g2" {
		t.Fatalf("ListGroups = %+v", groups)
	}
}

func BadNames(t *testing.T, f Factory) {
	s := f.New(t)
	for _, err := range []error{
		s.PutTopic(store.Topic{}),
		s.PutGroup(store.Group{Name: "a\x00b"}),
		s.PutGenerations(store.Generation{Group: "g"}),
	} {
		if err == nil {
			t.Error("a bad name was accepted")
		}
	}
}

func Buckets(t *testing.T, f Factory) {
	s := f.New(t)
	err := s.Update(func(tx store.Tx) error {
		for _, k := range []string{"lease/b", "lease/a", "other"} {
			if err := tx.Put("locks", k, []byte("v-"+k)); err != nil {
				return err
			}
		}
		n, err := tx.NextSequence("locks")
		if err != nil || n != 1 {
			return fmt.Errorf("first sequence %d, %v", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A failing transaction leaves nothing behind.
	boom := errors.New("boom")
	err = s.Update(func(tx store.Tx) error {
		if err := tx.Put("locks", "lease/c", []byte("x")); err != nil {
			return err
		}
		if _, err := tx.NextSequence("locks"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want boom", err)
	}
	err = s.View(func(tx store.Tx) error {
		var keys []string
		if err := tx.List("locks", "lease/", func(k string, v []byte) error {
			keys = append(keys, k+"="+string(v))
			return nil
		}); err != nil {
			return err
		}
		if want := []string{"lease/a=v-lease/a", "lease/b=v-lease/b"}; !reflect.DeepEqual(keys, want) {
			return fmt.Errorf("List = %v, want %v", keys, want)
		}
		if _, ok, _ := tx.Get("locks", "lease/c"); ok {
			return errors.New("a rolled-back write is visible")
		}
		if _, ok, err := tx.Get("nosuch", "k"); ok || err != nil {
			return fmt.Errorf("Get on an absent bucket: %v, %v", ok, err)
		}
		if err := tx.Put("locks", "k", nil); err == nil {
			return errors.New("Put in a read-only transaction succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx store.Tx) error {
		if err := tx.Delete("locks", "lease/a"); err != nil {
			return err
		}
		n, err := tx.NextSequence("locks")
		if n != 2 {
			return fmt.Errorf("sequence after a rolled-back one is %d, want 2 (%v)", n, err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx store.Tx) error { return tx.Put("topics", "k", nil) })
	if !errors.Is(err, store.ErrReserved) {
		t.Fatalf("Put into a reserved bucket: %v", err)
	}
}

func putRecord(t *testing.T, s Store, topic string, n int64, at time.Time) {
	t.Helper()
	err := s.Update(func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", topic, n), fmt.Appendf(nil, `{"generation":%d,"at":%q}`, n, at.Format(time.RFC3339Nano)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// numbers is the generation number of every key of (g, topic)'s history, in key order.
func numbers(t *testing.T, s Store, topic string) []int64 {
	t.Helper()
	var out []int64
	for _, key := range slices.Sorted(maps.Keys(rawHistory(t, s, topic))) {
		n, err := store.HistoryNumber(key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// trimHistory runs TrimHistory on (g, T) and returns how many records it dropped.
func trimHistory(t *testing.T, s Store, r store.Retention, now time.Time) int {
	t.Helper()
	var n int
	if err := s.Update(func(tx store.Tx) (err error) {
		n, err = store.TrimHistory(tx, "g", "T", r, now, store.RecordTime)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TrimHistory(t *testing.T, f Factory) {
	s := f.New(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Numbers past 15 and 255 check that keys sort by number, not by text.
	for _, n := range []int64{1, 2, 16, 17, 256, 257} {
		putRecord(t, s, "T", n, now.Add(time.Duration(n)*time.Minute))
	}
	putRecord(t, s, "T2", 1, now) // another topic is left alone
	trim := func(r store.Retention, at time.Time) int { return trimHistory(t, s, r, at) }
	if n := trim(store.Retention{Count: 4}, now); n != 2 || fmt.Sprint(numbers(t, s, "T")) != "[16 17 256 257]" {
		t.Fatalf("count trim dropped %d, left %v", n, numbers(t, s, "T"))
	}
	// Older than an hour at now+257min: 16 and 17 go; 256 and 257 are young enough.
	if n := trim(store.Retention{MaxAge: time.Hour}, now.Add(257*time.Minute)); n != 2 || fmt.Sprint(numbers(t, s, "T")) != "[256 257]" {
		t.Fatalf("age trim dropped %d, left %v", n, numbers(t, s, "T"))
	}
	// Everything old: the newest stays.
	if trim(store.Retention{MaxAge: time.Minute}, now.Add(24*time.Hour)); fmt.Sprint(numbers(t, s, "T")) != "[257]" {
		t.Fatalf("the newest record was trimmed: %v", numbers(t, s, "T"))
	}
	// A damaged record counts as old.
	if err := s.Update(func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 300), []byte("{half"))
	}); err != nil {
		t.Fatal(err)
	}
	putRecord(t, s, "T", 301, now.Add(24*time.Hour))
	if trim(store.Retention{MaxAge: time.Hour}, now.Add(24*time.Hour)); fmt.Sprint(numbers(t, s, "T")) != "[301]" {
		t.Fatalf("after trimming a damaged record: %v", numbers(t, s, "T"))
	}
	if err := s.Update(func(tx store.Tx) error { return store.DeleteHistory(tx, "g") }); err != nil {
		t.Fatal(err)
	}
	if len(numbers(t, s, "T")) != 0 || len(numbers(t, s, "T2")) != 0 {
		t.Fatal("DeleteHistory left records")
	}
	if _, err := store.HistoryNumber("short"); err == nil {
		t.Fatal("a short key parsed")
	}
}

// historyRecord is a JSON history record of exactly size bytes (at least 100) with its "at"
// first, or last.
func historyRecord(n int64, at time.Time, size int, atLast bool) []byte {
	head := fmt.Sprintf(`{"generation":%d,"at":%q,"pad":"`, n, at.Format(time.RFC3339Nano))
	tail := `"}`
	if atLast {
		head, tail = fmt.Sprintf(`{"generation":%d,"pad":"`, n), fmt.Sprintf(`","at":%q}`, at.Format(time.RFC3339Nano))
	}
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// rawHistory is every key under (g, topic)'s history prefix with its value's length.
func rawHistory(t *testing.T, s Store, topic string) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := s.View(func(tx store.Tx) error {
		return tx.List(store.HistoryBucket, store.HistoryPrefix("g", topic), func(key string, value []byte) error {
			out[key] = len(value)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// HistoryInParts: PutHistory stores a record longer than store.HistoryPartSize in parts of at
// most that size, and ListHistory and GetHistory give back its bytes; a record in one key of
// any length (as earlier versions wrote them) reads as it is; TrimHistory and DeleteHistory
// take a record's parts with it, and read a record's time from all of it when its first part
// does not hold it; a part without its record is an error naming its key.
func HistoryInParts(t *testing.T, f Factory) {
	s := f.New(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const part = store.HistoryPartSize
	want := map[int64][]byte{
		1: historyRecord(1, now, 100, false),               // one key
		2: historyRecord(2, now, 3*part+500, false),        // four parts
		3: historyRecord(3, now, 2*part-7, true),           // two parts, "at" in the last
		4: historyRecord(4, now, 4*part+part/2, true),      // five parts, "at" in the last
		5: historyRecord(5, now, 2*part, false),            // exactly two full parts
		6: historyRecord(6, now, 2*part+123, false),        // written in one key, as before parts
		7: historyRecord(7, now, part, false),              // one key of exactly one part's size
		8: historyRecord(8, now.Add(time.Hour), 150, true), // the newest
	}
	err := s.Update(func(tx store.Tx) error {
		for n := int64(1); n <= 8; n++ {
			if n == 6 || n == 7 {
				if err := tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", n), want[n]); err != nil {
					return err
				}
				continue
			}
			if err := store.PutHistory(tx, "g", "T", n, want[n]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := rawHistory(t, s, "T")
	for key, size := range keys {
		if n, _ := store.HistoryNumber(key); size > part && n != 6 {
			t.Errorf("key %q holds %d bytes, more than a part", key, size)
		}
	}
	if len(keys) != 1+4+2+5+2+1+1+1 {
		t.Errorf("%d keys for the 8 records, want 17", len(keys))
	}
	read := func() map[int64][]byte {
		t.Helper()
		got := map[int64][]byte{}
		var order []int64
		err := s.View(func(tx store.Tx) error {
			return store.ListHistory(tx, "g", "T", func(n int64, value []byte) error {
				got[n] = slices.Clone(value)
				order = append(order, n)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(order) {
			t.Errorf("ListHistory order %v", order)
		}
		return got
	}
	got := read()
	for n, w := range want {
		if !bytes.Equal(got[n], w) {
			t.Errorf("record %d: ListHistory gave %d bytes, want %d", n, len(got[n]), len(w))
		}
		err := s.View(func(tx store.Tx) error {
			v, ok, err := store.GetHistory(tx, "g", "T", n)
			if err != nil || !ok || !bytes.Equal(v, w) {
				t.Errorf("record %d: GetHistory gave %d bytes, %v, %v; want %d", n, len(v), ok, err, len(w))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Count: 1 and 2 go, with 2's parts.
	trim := func(r store.Retention, at time.Time) int { return trimHistory(t, s, r, at) }
	if n := trim(store.Retention{Count: 6}, now); n != 2 {
		t.Fatalf("count trim dropped %d records, want 2", n)
	}
	if keys := rawHistory(t, s, "T"); len(keys) != 2+5+2+1+1+1 {
		t.Fatalf("after dropping records 1 and 2: %d keys left, want 12", len(keys))
	}
	// Age: 3's time is in its last part; read from the first alone it would count as old.
	if n := trim(store.Retention{MaxAge: time.Minute}, now); n != 0 {
		t.Fatalf("age trim of records as old as the limit dropped %d", n)
	}
	if n := trim(store.Retention{MaxAge: time.Minute}, now.Add(30*time.Minute)); n != 5 {
		t.Fatalf("age trim dropped %d records, want 5 (3 to 7)", n)
	}
	if got := read(); len(got) != 1 || !bytes.Equal(got[8], want[8]) {
		t.Fatalf("after the age trim: records %v, want only 8", slices.Sorted(maps.Keys(got)))
	}
	if keys := rawHistory(t, s, "T"); len(keys) != 1 {
		t.Fatalf("after the age trim: keys %v, want 8's only", keys)
	}
	// A part whose record is gone: an error naming it.
	orphan := store.HistoryKey("g", "T", 9) + "\x00" + "00000001"
	if err := s.Update(func(tx store.Tx) error { return tx.Put(store.HistoryBucket, orphan, []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx store.Tx) error {
		return store.ListHistory(tx, "g", "T", func(int64, []byte) error { return nil })
	})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", orphan)) {
		t.Fatalf("ListHistory over a part without its record: %v, want an error naming %q", err, orphan)
	}
	if err := s.Update(func(tx store.Tx) error {
		if err := store.PutHistory(tx, "g", "T", 10, want[2]); err != nil {
			return err
		}
		return store.DeleteHistory(tx, "g")
	}); err != nil {
		t.Fatal(err)
	}
	if keys := rawHistory(t, s, "T"); len(keys) != 0 {
		t.Fatalf("DeleteHistory left %v", keys)
	}
}

func PutGenerationsTxIsOneTransaction(t *testing.T, f Factory) {
	s := f.New(t)
	gen := store.Generation{Group: "g", Topic: "T", Number: 1}
	boom := errors.New("boom")
	err := s.PutGenerationsTx([]store.Generation{gen}, func(tx store.Tx) error {
		if err := tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 1), []byte(`{}`)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if gens, _ := s.ListGenerations(); len(gens) != 0 || len(numbers(t, s, "T")) != 0 {
		t.Fatalf("a failed transaction left %v and %v", gens, numbers(t, s, "T"))
	}
	if err := s.PutGenerationsTx([]store.Generation{gen}, func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 1), []byte(`{}`))
	}); err != nil {
		t.Fatal(err)
	}
	if gens, _ := s.ListGenerations(); len(gens) != 1 || len(numbers(t, s, "T")) != 1 {
		t.Fatalf("stored %v and %v", gens, numbers(t, s, "T"))
	}
	if err := s.PutGenerationsTx([]store.Generation{{Group: "", Topic: "T"}}, func(store.Tx) error { return nil }); err == nil {
		t.Fatal("a generation without a group was stored")
	}
}

func TopicTx(t *testing.T, f Factory) {
	s := f.New(t)
	var err error
	p := autoscale.DefaultPolicy()
	p.Enabled = true
	topic := store.Topic{Name: "T", Brokers: []store.Broker{{Name: "b", ReadQueues: 2, WriteQueues: 1}}, Autoscale: &p}
	put := func(tx store.Tx) error { return tx.Put("autoscale", "T", []byte("state")) }
	if err := s.PutTopicTx(topic, put); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTopic("T")
	if err != nil || got.Autoscale == nil || *got.Autoscale != p || got.Brokers[0] != topic.Brokers[0] {
		t.Fatalf("GetTopic = %+v, %v", got, err)
	}
	// A failing fn writes nothing, the topic included.
	boom := errors.New("boom")
	topic.Brokers[0].ReadQueues = 9
	if err := s.PutTopicTx(topic, func(tx store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("PutTopicTx with a failing fn: %v", err)
	}
	if got, _ := s.GetTopic("T"); got.Brokers[0].ReadQueues != 2 {
		t.Fatalf("a failed PutTopicTx wrote the topic: %+v", got)
	}
	if err := s.DeleteTopicTx("T", func(tx store.Tx) error { return tx.Delete("autoscale", "T") }); err != nil {
		t.Fatal(err)
	}
	var found bool
	s.View(func(tx store.Tx) error { _, found, err = tx.Get("autoscale", "T"); return err })
	if _, err := s.GetTopic("T"); !errors.Is(err, store.ErrNotFound) || found {
		t.Fatalf("after DeleteTopicTx: topic %v, state found %v", err, found)
	}
	if err := s.DeleteTopicTx("T", func(store.Tx) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteTopicTx of an absent topic: %v", err)
	}
	if err := s.PutTopicTx(store.Topic{Name: "T"}, func(tx store.Tx) error { return tx.Put("topics", "x", nil) }); !errors.Is(err, store.ErrReserved) {
		t.Fatalf("a typed bucket through the generic Tx: %v", err)
	}
}

// TrimManyAtOnce: a trim that drops far more records than etcd takes operations in one
// transaction (a retention lowered at a restart) is one write, not a failure.
func TrimManyAtOnce(t *testing.T, f Factory) {
	s := f.New(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for n := int64(1); n <= 300; n++ {
		putRecord(t, s, "T", n, now)
	}
	putRecord(t, s, "U", 1, now)
	var dropped int
	err := s.Update(func(tx store.Tx) (err error) {
		dropped, err = store.TrimHistory(tx, "g", "T", store.Retention{Count: 2}, now, store.RecordTime)
		return err
	})
	if err != nil || dropped != 298 || fmt.Sprint(numbers(t, s, "T")) != "[299 300]" || len(numbers(t, s, "U")) != 1 {
		t.Fatalf("trim to 2 of 300: dropped %d, %v; left %v and %v", dropped, err, numbers(t, s, "T"), numbers(t, s, "U"))
	}
}
