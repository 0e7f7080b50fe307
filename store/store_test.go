package store_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/store"
)

func open(t *testing.T, dir string) *store.Bolt {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func topic(name string, read int) store.Topic {
	return store.Topic{Name: name, Brokers: []store.Broker{{Name: "broker-a", ReadQueues: read, WriteQueues: read}}}
}

func TestTopics(t *testing.T) {
	s := open(t, t.TempDir())
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

func TestGroupsAndGenerations(t *testing.T) {
	s := open(t, t.TempDir())
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

func TestBadNames(t *testing.T) {
	s := open(t, t.TempDir())
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

func TestBuckets(t *testing.T) {
	s := open(t, t.TempDir())
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

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(topic("T", 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGroup(store.Group{Name: "g", Binding: store.Binding{Strategy: "circle"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx store.Tx) error { _, err := tx.NextSequence("tokens"); return err }); err != nil {
		t.Fatal(err)
	}
	// The file is locked while open: a second daemon on the folder fails with a clear message.
	if _, err := store.Open(dir, store.Options{LockTimeout: 50 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(topic("U", 1)); err == nil {
		t.Fatal("PutTopic after Close succeeded")
	}
	s = open(t, dir)
	if got, err := s.GetTopic("T"); err != nil || !reflect.DeepEqual(got, topic("T", 4)) {
		t.Fatalf("after reopen GetTopic = %+v, %v", got, err)
	}
	if g, err := s.GetGroup("g"); err != nil || g.Strategy != "circle" {
		t.Fatalf("after reopen GetGroup = %+v, %v", g, err)
	}
	err = s.Update(func(tx store.Tx) error {
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

// TestSurvivesKill writes from a child process, kills it with SIGKILL without closing the
// store, and reads every acknowledged write back.
func TestSurvivesKill(t *testing.T) {
	if dir := os.Getenv("STORE_KILL_CHILD"); dir != "" {
		killChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSurvivesKill$")
	cmd.Env = append(os.Environ(), "STORE_KILL_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints one line per acknowledged write; read a few, then kill it mid-stream.
	sc := bufio.NewScanner(out)
	acked := 0
	for acked < 20 && sc.Scan() {
		acked++
	}
	if acked < 20 {
		t.Fatalf("child ended after %d writes: %v", acked, sc.Err())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s := open(t, dir)
	topics, err := s.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) < acked {
		t.Fatalf("%d topics after kill -9, but %d writes were acknowledged", len(topics), acked)
	}
}

func killChild(dir string) {
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		if err := s.PutTopic(topic(fmt.Sprintf("T%06d", i), 4)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("99")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := store.Open(dir, store.Options{}); err == nil || !strings.Contains(err.Error(), `schema version "99"`) {
		t.Fatalf("Open of a newer file: %v", err)
	}
}

// damage overwrites n bytes at off of the store file in dir with bytes from a fixed seed.
func damage(t *testing.T, dir string, off int64, n int, seed byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, store.FileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, n)
	x := uint32(seed) | 1
	for i := range junk {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		junk[i] = byte(x)
	}
	if _, err := f.WriteAt(junk, off); err != nil {
		t.Fatal(err)
	}
}

// A damaged page made bbolt panic at start ("Page expected to be: 3", "invalid freelist page").
// Every page of a small store is damaged in turn: Open either refuses with one message naming
// the file, what is wrong and what to do, or (the page was free) opens a store that reads back
// what was written. It never panics, and the damage of a page in use is always found.
func TestOpenDamagedFile(t *testing.T) {
	src := t.TempDir()
	s, err := store.Open(src, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.PutTopic(topic(fmt.Sprintf("T%02d", i), 8)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	orig, err := os.ReadFile(filepath.Join(src, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	refused := 0
	for off := int64(0); off < int64(len(orig)); off += page {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, store.FileName), orig, 0o600); err != nil {
			t.Fatal(err)
		}
		damage(t, dir, off, int(page), byte(off/page))
		s, err := store.Open(dir, store.Options{})
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, filepath.Join(dir, store.FileName)) || !strings.Contains(msg, "damaged") || !strings.Contains(msg, "backup") {
				t.Errorf("page at %d: error %q does not name the file, the damage and the way out", off, msg)
			}
			if strings.Count(msg, "\n") > 0 {
				t.Errorf("page at %d: error spans lines: %q", off, msg)
			}
			refused++
			continue
		}
		ts, err := s.ListTopics()
		s.Close()
		if err != nil || len(ts) != 50 {
			t.Errorf("page at %d: opened, then %d topics, %v", off, len(ts), err)
		}
	}
	if refused == 0 {
		t.Fatal("no damaged page was refused")
	}
	t.Logf("%d of %d damaged pages refused", refused, int64(len(orig))/page)
}

// A 0-byte file (a first start cut short, a lost file) once opened as a new, empty store,
// silently dropping every topic and group: it is refused unless Options.CreateEmpty says a new
// store is wanted. A missing file is a first start and is created.
func TestOpenEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, store.FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(dir, store.Options{})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "--create-store") {
		t.Fatalf("Open of a 0-byte file: %v", err)
	}
	s, err := store.Open(dir, store.Options{CreateEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(topic("T", 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	open(t, dir) // no longer empty: opens without the option
	open(t, t.TempDir())
}
