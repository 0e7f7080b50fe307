package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/store/storetest"
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

// The bbolt store runs the suite every store shares.
func TestShared(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) storetest.Store { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, s storetest.Store) storetest.Store {
			return open(t, filepath.Dir(s.(*store.Bolt).Path()))
		},
	})
}

// The file is locked while open: a second daemon on the folder fails with a clear message.
func TestSecondOpenRefused(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	if _, err := store.Open(dir, store.Options{LockTimeout: 50 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Open: %v", err)
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

// A file of schema 1 (history records in one key, which this version reads as they are) opens,
// and schema 2 is written into it: an allocd that reads only schema 1 then refuses the file
// rather than misread the history records written in parts from now on.
func TestOlderSchemaUpgraded(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	schema := func(set string) string { return storetest.BoltSchema(t, dir, set) }
	schema("1")
	s, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("Open of a schema 1 file: %v", err)
	}
	s.Close()
	if v := schema(""); v != "2" || s.UpgradedFrom() != 1 {
		t.Fatalf("schema %q after opening a schema 1 file, upgraded from %d; want 2, from 1", v, s.UpgradedFrom())
	}
	if s, err = store.Open(dir, store.Options{}); err != nil || s.UpgradedFrom() != 0 {
		t.Fatalf("reopening the upgraded file: %v, upgraded from %d; want no upgrade", err, s.UpgradedFrom())
	}
	s.Close()
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
