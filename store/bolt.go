package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the database file Open creates in its folder.
const FileName = "allocd.db"

// schemaVersion is written into a new file, and into a file of an older schema when it is
// opened; a file of a newer schema is refused rather than misread. 2: history records longer
// than HistoryPartSize are stored in parts, which an allocd reading schema 1 would misread
// (it reads schema 1 files as they are).
const schemaVersion = 2

// Options tunes Open. The zero value is right for the daemon.
type Options struct {
	// LockTimeout bounds the wait for the file lock that keeps a second daemon off the same
	// folder (default 1 s).
	LockTimeout time.Duration
	// NoSync skips fsync on commit. Only for tests: a crash may then lose or corrupt data.
	NoSync bool
	// CreateEmpty accepts an empty (0-byte) database file as a new store. Without it such a
	// file is refused: it is what a first start cut short or a lost file leaves, and opening it
	// would start the daemon silently with no topics and no groups. (A missing file is a
	// first start and is always created.) The daemon's flag is --create-store.
	CreateEmpty bool
}

// ErrDamaged is matched (errors.Is) by Open's error for a file that is not a sound bbolt
// database: a damaged page, a bad freelist, a torn or foreign file.
var ErrDamaged = errors.New("the file is damaged")

// Bolt is the embedded file store: one bbolt file in the data folder. bbolt commits with
// copy-on-write pages and an fsync'd meta page, so a kill -9 at any instant leaves either the
// old or the new state, never a torn one; it holds an exclusive file lock while open.
type Bolt struct {
	db   *bolt.DB
	path string
	// upgradedFrom is the schema version the file had when Open wrote the current one over
	// it; 0 when it needed none.
	upgradedFrom int
	records      recordBuffers
}

// UpgradedFrom is the schema version the file had when Open upgraded it to this version's, or
// 0 when it needed no upgrade. From then on an allocd older than this one refuses the file.
func (s *Bolt) UpgradedFrom() int { return s.upgradedFrom }

var _ Store = (*Bolt)(nil)

// Open opens (creating if needed) the store in folder dir.
func Open(dir string, opts Options) (*Bolt, error) {
	if dir == "" {
		return nil, &Error{Op: "open", Err: errors.New("no data folder given")}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &Error{Op: "open " + dir, Err: err}
	}
	path := filepath.Join(dir, FileName)
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 && !opts.CreateEmpty {
		return nil, &Error{Op: "open " + path, Err: errors.New("the file is empty (0 bytes), so it holds no topics or groups: " +
			"restore it from a backup, or start a new, empty store with --create-store")}
	}
	db, err := openChecked(path, opts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, &Error{Op: "open " + path, Err: fmt.Errorf("locked by another process (is another allocd using --data-dir %s?)", dir)}
	}
	if errors.Is(err, ErrDamaged) {
		return nil, &Error{Op: "open " + path, Err: fmt.Errorf("%w (%v): stop here and restore %s from a backup, "+
			"or move it away to start with an empty store", ErrDamaged, oneLine(err), FileName)}
	}
	if err != nil {
		return nil, &Error{Op: "open " + path, Err: err}
	}
	s := &Bolt{db: db, path: path}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// maxCheckErrors is how many of Tx.Check's findings an error quotes.
const maxCheckErrors = 3

// openChecked opens the file and checks every page reachable from its roots (bbolt's Tx.Check)
// before anything reads them: bbolt asserts the pages it reads with panics ("Page expected to
// be: 3", "invalid freelist page"), and a damaged page must give an error, never a crash.
// Opening itself reads the meta and freelist pages, so a panic there becomes ErrDamaged too.
// The check reads the whole file once: for the daemon's stores (megabytes) a few milliseconds.
func openChecked(path string, opts Options) (db *bolt.DB, err error) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				db, err = nil, fmt.Errorf("%w: unreadable page: %v", ErrDamaged, r)
			}
		}()
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync})
	}()
	switch {
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("%w: %v", ErrDamaged, err)
	case err != nil:
		return nil, err
	}
	var found []string
	n := 0
	verr := db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			if n < maxCheckErrors {
				found = append(found, e.Error())
			}
			n++
		}
		return nil
	})
	if verr != nil {
		found = append(found, verr.Error())
		n++
	}
	if n == 0 {
		return db, nil
	}
	db.Close()
	msg := strings.Join(found, "; ")
	if n > len(found) {
		msg += fmt.Sprintf("; %d problems in all", n)
	}
	return nil, fmt.Errorf("%w: %s", ErrDamaged, msg)
}

// oneLine strips ErrDamaged's own text and folds a message onto one line; the word panic
// (Tx.Check reports bbolt's assertions so) would only suggest allocd crashed.
func oneLine(err error) string {
	s := strings.TrimPrefix(err.Error(), ErrDamaged.Error()+": ")
	s = strings.ReplaceAll(s, "panic: ", "unreadable page: ")
	return strings.Join(strings.Fields(s), " ")
}

// Path is the database file's path.
func (s *Bolt) Path() string { return s.path }

func (s *Bolt) init() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{bucketTopics, bucketGroups, bucketGenerations, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		meta := tx.Bucket([]byte(bucketMeta))
		v := meta.Get([]byte("schema"))
		if v == nil {
			return meta.Put([]byte("schema"), []byte(strconv.Itoa(schemaVersion)))
		}
		n, err := strconv.Atoi(string(v))
		if err != nil || n > schemaVersion {
			return fmt.Errorf("file has schema version %q; this allocd reads up to %d", v, schemaVersion)
		}
		if n < schemaVersion {
			s.upgradedFrom = n
			return meta.Put([]byte("schema"), []byte(strconv.Itoa(schemaVersion)))
		}
		return nil
	})
	return opErr(err, "open %s", s.path)
}

// Close closes the file.
func (s *Bolt) Close() error { return opErr(s.db.Close(), "close %s", s.path) }

func (s *Bolt) PutTopic(t Topic) error {
	if err := checkName("topic", t.Name); err != nil {
		return &Error{Op: "put topic", Err: err}
	}
	return opErr(s.putJSON(bucketTopics, t.Name, t), "put topic %q", t.Name)
}

func (s *Bolt) GetTopic(name string) (Topic, error) {
	var t Topic
	return t, opErr(s.getJSON(bucketTopics, name, &t), "get topic %q", name)
}

func (s *Bolt) DeleteTopic(name string) error {
	return opErr(s.delete(bucketTopics, name), "delete topic %q", name)
}

func (s *Bolt) ListTopics() ([]Topic, error) {
	ts, err := listJSON[Topic](s, bucketTopics, "")
	return ts, opErr(err, "list topics")
}

func (s *Bolt) PutGroup(g Group) error {
	if err := checkName("group", g.Name); err != nil {
		return &Error{Op: "put group", Err: err}
	}
	return opErr(s.putJSON(bucketGroups, g.Name, g), "put group %q", g.Name)
}

func (s *Bolt) GetGroup(name string) (Group, error) {
	var g Group
	return g, opErr(s.getJSON(bucketGroups, name, &g), "get group %q", name)
}

func (s *Bolt) DeleteGroup(name string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		groups := tx.Bucket([]byte(bucketGroups))
		if groups.Get([]byte(name)) == nil {
			return ErrNotFound
		}
		if err := groups.Delete([]byte(name)); err != nil {
			return err
		}
		// The group's generations share the key prefix "name\x00". Collect the keys first:
		// deleting under a cursor skips entries.
		gens := tx.Bucket([]byte(bucketGenerations))
		prefix := []byte(name + "\x00")
		var keys [][]byte
		c := gens.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := gens.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return opErr(err, "delete group %q", name)
}

func (s *Bolt) ListGroups() ([]Group, error) {
	gs, err := listJSON[Group](s, bucketGroups, "")
	return gs, opErr(err, "list groups")
}

func (s *Bolt) PutGenerations(gens ...Generation) error {
	if len(gens) == 0 {
		return nil
	}
	vals, err := encodeGenerations(gens, &s.records)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error { return putGenerations(tx, gens, vals) })
	s.records.give(vals)
	return opErr(err, "put %d generations", len(gens))
}

func encodeGenerations(gens []Generation, bufs *recordBuffers) ([][]byte, error) {
	vals := make([][]byte, len(gens))
	for i, g := range gens {
		if err := checkName("group", g.Group); err != nil {
			return nil, &Error{Op: "put generations", Err: err}
		}
		if err := checkName("topic", g.Topic); err != nil {
			return nil, &Error{Op: "put generations", Err: err}
		}
		b, err := g.appendJSON(bufs.take()) // not json.Marshal, which would scan the record once more
		if err != nil {
			return nil, &Error{Op: fmt.Sprintf("put generation %q/%q", g.Group, g.Topic), Err: err}
		}
		vals[i] = b
	}
	return vals, nil
}

func putGenerations(tx *bolt.Tx, gens []Generation, vals [][]byte) error {
	b := tx.Bucket([]byte(bucketGenerations))
	for i, g := range gens {
		if err := b.Put([]byte(generationKey(g.Group, g.Topic)), vals[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Bolt) ListGenerations() ([]Generation, error) {
	gs, err := listJSON[Generation](s, bucketGenerations, "")
	return gs, opErr(err, "list generations")
}

func (s *Bolt) putJSON(bucket, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), b) })
}

func (s *Bolt) getJSON(bucket, key string, v any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket)).Get([]byte(key))
		if b == nil {
			return ErrNotFound
		}
		return json.Unmarshal(b, v)
	})
}

func (s *Bolt) delete(bucket, key string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b.Get([]byte(key)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(key))
	})
}

func listJSON[T any](s *Bolt, bucket, prefix string) ([]T, error) {
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte(bucket)).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			var t T
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

func (s *Bolt) Update(fn func(Tx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (s *Bolt) View(fn func(Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) bucket(name string, create bool) (*bolt.Bucket, error) {
	if err := CheckBucket(name); err != nil {
		return nil, err
	}
	if !create || !t.tx.Writable() {
		return t.tx.Bucket([]byte(name)), nil
	}
	b, err := t.tx.CreateBucketIfNotExists([]byte(name))
	return b, opErr(err, "create bucket %q", name)
}

func (t boltTx) Get(bucket, key string) ([]byte, bool, error) {
	b, err := t.bucket(bucket, false)
	if err != nil || b == nil {
		return nil, false, err
	}
	v := b.Get([]byte(key))
	if v == nil {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (t boltTx) Put(bucket, key string, value []byte) error {
	b, err := t.bucket(bucket, true)
	if err != nil {
		return err
	}
	if b == nil {
		return &Error{Op: fmt.Sprintf("put %q/%q", bucket, key), Err: berrors.ErrTxNotWritable}
	}
	return opErr(b.Put([]byte(key), value), "put %q/%q", bucket, key)
}

func (t boltTx) Delete(bucket, key string) error {
	b, err := t.bucket(bucket, false)
	if err != nil || b == nil {
		return err
	}
	return opErr(b.Delete([]byte(key)), "delete %q/%q", bucket, key)
}

func (t boltTx) List(bucket, prefix string, fn func(key string, value []byte) error) error {
	b, err := t.bucket(bucket, false)
	if err != nil || b == nil {
		return err
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := fn(string(k), v); err != nil {
			return err
		}
	}
	return nil
}

func (t boltTx) NextSequence(bucket string) (uint64, error) {
	b, err := t.bucket(bucket, true)
	if err != nil {
		return 0, err
	}
	if b == nil {
		return 0, &Error{Op: fmt.Sprintf("next sequence of %q", bucket), Err: berrors.ErrTxNotWritable}
	}
	n, err := b.NextSequence()
	return n, opErr(err, "next sequence of %q", bucket)
}
