package etcdstore

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/store"
)

// txn is one transaction: reads go to etcd at one revision (the first read's) and are
// remembered with their mod revisions; writes are buffered and committed in one etcd Txn whose
// compares are the fence and what was read.
type txn struct {
	s        *Store
	writable bool
	rev      int64              // revision every read is made at; 0 before the first
	reads    map[string]int64   // key -> its mod revision when read (0: absent)
	listed   map[string]string  // listed range start -> end
	writes   map[string]*[]byte // key -> new value; nil: deleted
	dels     []keyRange         // range deletes
	err      error              // a failure while buffering a write, returned by commit
}

var errReadOnly = errors.New("a read-only transaction (View) cannot write")

func (x *txn) run(fn func(store.Tx) error) error {
	if fn == nil {
		return nil
	}
	return fn(bucketTx{x})
}

// keyRange is the keys k with start <= k < end.
type keyRange struct{ start, end string }

func (r keyRange) has(key string) bool { return key >= r.start && key < r.end }

func (x *txn) deleted(key string) bool {
	for _, r := range x.dels {
		if r.has(key) {
			return true
		}
	}
	return false
}

func (x *txn) readOpts(keysOnly bool) []clientv3.OpOption {
	var opts []clientv3.OpOption
	if x.rev > 0 {
		opts = append(opts, clientv3.WithRev(x.rev))
	}
	if keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	return opts
}

// get returns key's value as this transaction sees it (its own writes first).
func (x *txn) get(key string, keysOnly bool) ([]byte, bool, error) {
	if w, ok := x.writes[key]; ok {
		if w == nil {
			return nil, false, nil
		}
		return bytes.Clone(*w), true, nil
	}
	if x.deleted(key) {
		return nil, false, nil
	}
	ctx, cancel := x.s.call()
	defer cancel()
	resp, err := x.s.cli.Get(ctx, key, x.readOpts(keysOnly)...)
	if err != nil {
		return nil, false, x.s.readErr(err)
	}
	if x.rev == 0 {
		x.rev = resp.Header.Revision
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	if x.writable {
		if x.reads == nil {
			x.reads = map[string]int64{}
		}
		if _, seen := x.reads[key]; !seen {
			if kv != nil {
				x.reads[key] = kv.ModRevision
			} else {
				x.reads[key] = 0
			}
		}
	}
	if kv == nil {
		return nil, false, nil
	}
	return kv.Value, true, nil
}

// readErr is etcdErr for a read inside a transaction: a revision compacted away since the
// transaction's first read is a conflict (the write runs again at a newer revision).
func (s *Store) readErr(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return s.etcdErr(err, false)
}

func (x *txn) put(key string, value []byte) {
	if x.deleted(key) {
		x.splitRangeDeletes(key)
	}
	if x.writes == nil {
		x.writes = map[string]*[]byte{}
	}
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	x.writes[key] = &v
}

func (x *txn) del(key string) {
	if x.deleted(key) {
		return // deleted already
	}
	if x.writes == nil {
		x.writes = map[string]*[]byte{}
	}
	x.writes[key] = nil
}

// deleteExisting deletes key, or returns store.ErrNotFound if there is none.
func (x *txn) deleteExisting(key string) error {
	_, ok, err := x.get(key, true)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrNotFound
	}
	x.del(key)
	return nil
}

// deleteRange deletes every key k with start <= k < end: one range delete in the commit.
func (x *txn) deleteRange(start, end string) {
	if start >= end {
		return
	}
	r := keyRange{start, end}
	for k := range x.writes {
		if r.has(k) {
			delete(x.writes, k)
		}
	}
	x.dels = append(x.dels, r)
}

func (x *txn) deletePrefix(p string) { x.deleteRange(p, clientv3.GetPrefixRangeEnd(p)) }

// splitRangeDeletes turns the range deletes that cover key into deletes of the keys they
// would remove, so that key can be written in the same Txn (etcd refuses a put inside a
// deleted range). Rare: nothing in the daemon writes under a range it deletes.
func (x *txn) splitRangeDeletes(key string) {
	var kept, split []keyRange
	for _, r := range x.dels {
		if r.has(key) {
			split = append(split, r)
		} else {
			kept = append(kept, r)
		}
	}
	x.dels = kept
	for _, r := range split {
		// The keys listed are compared in the commit (listRange records the range), so a key
		// added meanwhile makes the commit a conflict, not a key left behind.
		err := x.listRange(r.start, r.end, true, func(k string, _ []byte) error {
			x.del(k)
			return nil
		})
		if err != nil && x.err == nil {
			x.err = err
		}
	}
}

// listRange calls fn for every key in [start, end) as this transaction sees it, in key order.
func (x *txn) listRange(start, end string, keysOnly bool, fn func(key string, value []byte) error) error {
	found := map[string][]byte{}
	rev, err := x.s.scan(start, end, x.rev, keysOnly, func(kv *mvccpb.KeyValue) error {
		if k := string(kv.Key); !x.deleted(k) {
			found[k] = kv.Value
		}
		return nil
	})
	if err != nil {
		return x.s.readErr(err)
	}
	x.rev = rev
	if x.writable {
		if x.listed == nil {
			x.listed = map[string]string{}
		}
		x.listed[start] = end
	}
	for k, w := range x.writes {
		if k < start || k >= end {
			continue
		}
		if w == nil {
			delete(found, k)
		} else {
			found[k] = *w
		}
	}
	for _, k := range sortedKeys(found) {
		if err := fn(k, found[k]); err != nil {
			return err
		}
	}
	return nil
}

// commit writes the buffered writes in one Txn: If(fence, reads unchanged) Then(writes)
// Else(get the fence key), whose Else tells a lost fence from a changed read.
func (x *txn) commit() error {
	if x.err != nil {
		return x.err
	}
	if len(x.writes) == 0 && len(x.dels) == 0 {
		return nil
	}
	f := x.s.fence.Load()
	if f == nil {
		return errNoFence
	}
	s := x.s
	fenceCmp := clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev)
	cmps := append([]clientv3.Cmp{fenceCmp}, x.readCompares(s.opts.MaxTxnOps-1)...)
	size := len(f.key)*2 + 2*opOverhead
	for i := range cmps {
		c := cmps[i].GetCompare()
		size += len(c.Key) + len(c.RangeEnd) + opOverhead
	}
	ops := make([]clientv3.Op, 0, len(x.writes)+len(x.dels))
	for _, k := range sortedKeys(x.writes) {
		if w := x.writes[k]; w != nil {
			ops = append(ops, clientv3.OpPut(k, string(*w)))
			size += len(k) + len(*w) + opOverhead
		} else {
			ops = append(ops, clientv3.OpDelete(k))
			size += len(k) + opOverhead
		}
	}
	for _, r := range x.dels {
		ops = append(ops, clientv3.OpDelete(r.start, clientv3.WithRange(r.end)))
		size += len(r.start) + len(r.end) + opOverhead
	}
	if len(ops) > s.opts.MaxTxnOps {
		return fmt.Errorf("%w: %d writes, and etcd takes at most %d operations per transaction (--max-txn-ops); nothing was written",
			ErrTooLarge, len(ops), s.opts.MaxTxnOps)
	}
	if len(cmps) > s.opts.MaxTxnOps {
		return fmt.Errorf("%w: %d compares, and etcd takes at most %d per transaction (--max-txn-ops); nothing was written",
			ErrTooLarge, len(cmps), s.opts.MaxTxnOps)
	}
	if size > s.opts.MaxRequestBytes {
		return fmt.Errorf("%w: %s, and etcd takes at most %s per request (--max-request-bytes); nothing was written",
			ErrTooLarge, sizeString(size), sizeString(s.opts.MaxRequestBytes))
	}
	ctx, cancel := s.call()
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(f.key)).Commit()
	if err != nil {
		return s.etcdErr(err, true)
	}
	if resp.Succeeded {
		return nil
	}
	var kvs []*mvccpb.KeyValue
	if len(resp.Responses) > 0 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil {
			kvs = rr.Kvs
		}
	}
	if len(kvs) == 0 || kvs[0].CreateRevision != f.rev {
		now := "is gone"
		if len(kvs) > 0 {
			now = fmt.Sprintf("was created again at revision %d", kvs[0].CreateRevision)
		}
		return &lostFence{fmt.Errorf("%w: the election key %q of revision %d %s; nothing was written", store.ErrFenced, f.key, f.rev, now)}
	}
	return fmt.Errorf("%w (between its read at revision %d and its commit)", ErrConflict, x.rev)
}

// lostFence is a commit's failed fence compare, for which update calls Options.OnFenced.
type lostFence struct{ err error }

func (e *lostFence) Error() string { return e.err.Error() }
func (e *lostFence) Unwrap() error { return e.err }

// readCompares are the compares that what was read is unchanged: a key's mod revision, a
// listed range's newest mod revision. Beyond max, they fold into one range compare per record
// kind or bucket (coarser, never weaker).
func (x *txn) readCompares(max int) []clientv3.Cmp {
	if x.rev == 0 {
		return nil
	}
	var cmps []clientv3.Cmp
	if len(x.reads)+len(x.listed) <= max {
		for _, k := range sortedKeys(x.reads) {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", x.reads[k]))
		}
		for _, start := range sortedKeys(x.listed) {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(start), "<", x.rev+1).WithRange(x.listed[start]))
		}
		return cmps
	}
	areas := map[string]bool{}
	for k := range x.reads {
		areas[x.s.area(k)] = true
	}
	for k := range x.listed {
		areas[x.s.area(k)] = true
	}
	for _, a := range sortedKeys(areas) {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(a), "<", x.rev+1).WithPrefix())
	}
	return cmps
}

// area is the prefix of the record kind (or generic bucket) key belongs to.
func (s *Store) area(key string) string {
	rest := strings.TrimPrefix(key, s.p)
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return key
	}
	a := rest[:i+1]
	if a == "buckets/" {
		if j := strings.IndexByte(rest[i+1:], '/'); j >= 0 {
			a = rest[:i+1+j+1]
		}
	}
	return s.p + a
}

func sizeString(n int) string {
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + " MiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
}

// bucketTx is store.Tx over the generic buckets: bucket b's key k is PREFIX buckets/b/k, its
// sequence PREFIX seq/b.
type bucketTx struct{ x *txn }

var _ store.RangeDeleter = bucketTx{}

func (t bucketTx) key(bucket, key string) (string, error) {
	if err := store.CheckBucket(bucket); err != nil {
		return "", err
	}
	if strings.ContainsAny(bucket, "/\x00") {
		return "", &store.Error{Op: fmt.Sprintf("bucket %q", bucket), Err: errors.New("a bucket name in etcd cannot contain a / or a NUL byte")}
	}
	return t.x.s.bucketPrefix(bucket) + key, nil
}

func (t bucketTx) Get(bucket, key string) ([]byte, bool, error) {
	k, err := t.key(bucket, key)
	if err != nil {
		return nil, false, err
	}
	v, ok, err := t.x.get(k, false)
	return v, ok, store.Wrap(err, "get %q/%q", bucket, key)
}

func (t bucketTx) Put(bucket, key string, value []byte) error {
	k, err := t.key(bucket, key)
	if err != nil {
		return err
	}
	if !t.x.writable {
		return &store.Error{Op: fmt.Sprintf("put %q/%q", bucket, key), Err: errReadOnly}
	}
	t.x.put(k, value)
	return nil
}

func (t bucketTx) Delete(bucket, key string) error {
	k, err := t.key(bucket, key)
	if err != nil {
		return err
	}
	if !t.x.writable {
		return &store.Error{Op: fmt.Sprintf("delete %q/%q", bucket, key), Err: errReadOnly}
	}
	t.x.del(k)
	return nil
}

func (t bucketTx) DeleteRange(bucket, from, to string) error {
	start, err := t.key(bucket, from)
	if err != nil {
		return err
	}
	if !t.x.writable {
		return &store.Error{Op: fmt.Sprintf("delete %q/[%q, %q)", bucket, from, to), Err: errReadOnly}
	}
	end := t.x.s.bucketPrefix(bucket) + to
	if to == "" {
		end = clientv3.GetPrefixRangeEnd(t.x.s.bucketPrefix(bucket))
	}
	t.x.deleteRange(start, end)
	return nil
}

func (t bucketTx) List(bucket, prefix string, fn func(key string, value []byte) error) error {
	start, err := t.key(bucket, prefix)
	if err != nil {
		return err
	}
	bp := t.x.s.bucketPrefix(bucket)
	err = t.x.listRange(start, clientv3.GetPrefixRangeEnd(start), false, func(k string, v []byte) error {
		return fn(k[len(bp):], v)
	})
	return store.Wrap(err, "list %q/%q", bucket, prefix)
}

func (t bucketTx) NextSequence(bucket string) (uint64, error) {
	if _, err := t.key(bucket, ""); err != nil {
		return 0, err
	}
	op := fmt.Sprintf("next sequence of %q", bucket)
	if !t.x.writable {
		return 0, &store.Error{Op: op, Err: errReadOnly}
	}
	key := t.x.s.seqKey(bucket)
	v, ok, err := t.x.get(key, false)
	if err != nil {
		return 0, store.Wrap(err, "%s", op)
	}
	var n uint64
	if ok {
		if n, err = decodeSeq(key, v); err != nil {
			return 0, &store.Error{Op: op, Err: err}
		}
	}
	n++
	t.x.put(key, []byte(strconv.FormatUint(n, 10)))
	return n, nil
}

// decodeSeq reads a sequence record: a decimal number.
func decodeSeq(key string, v []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || n == 1<<64-1 {
		return 0, fmt.Errorf("sequence record %q is damaged: %q is not a number below 2^64-1", key, truncate(v, 40))
	}
	return n, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(bytes.Clone(b[:n]), "..."...)
	}
	return b
}
