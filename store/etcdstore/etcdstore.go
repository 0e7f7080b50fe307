// Package etcdstore keeps the daemon's durable state in etcd, so that several allocd replicas
// share it and a replica that dies loses nothing. Store implements store.Store,
// store.GenerationTx and store.TopicTx with bbolt's semantics (store.Bolt); Keeper implements
// registry.Keeper.
//
// Only the leader writes. Every write is one etcd transaction that succeeds only while the
// fence (the election key the leader won with, SetFence) still has the create revision it won
// with, and while every key the write read is unchanged (its mod revision); Succeeded is
// checked, not only the error. A write whose fence check fails returns an error matching
// store.ErrFenced and calls Options.OnFenced; a write with no fence set fails the same way
// (without the callback). Reads need no fence.
//
// Writes of one Store are serialized (as bbolt serializes its writers), so the compares on what
// was read only fail when something outside this Store changed a key: the transaction is then
// run again from the start, up to three times. A function passed to Update or a *Tx method may
// therefore run more than once.
//
// Limits: etcd takes at most --max-txn-ops (128) operations per transaction and
// --max-request-bytes (1.5 MiB) per request. A write that cannot fit is refused before it is
// sent, with an error matching ErrTooLarge that says which limit and by how much; nothing is
// written. Lists read in pages of ListPage keys, all at one revision.
//
// An etcd that does not answer fails a call after Options.RequestTimeout. For a write, etcd
// may still apply it (the outcome is unknown): the error says so.
package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allocd/allocd/store"
)

// Options tunes Open. The zero value is right for the daemon.
type Options struct {
	// Prefix is the key prefix of every record (default "/allocd/"); a "/" is added if it
	// does not end with one.
	Prefix string
	// RequestTimeout bounds each etcd call (default 5 s).
	RequestTimeout time.Duration
	// OnFenced is called, once per failed write, when a write's fence check fails: the
	// replica lost its leadership and must step down. It runs on the writing goroutine, after
	// the store's write lock is released, with the error the write returns.
	OnFenced func(error)
	// MaxTxnOps is the etcd server's --max-txn-ops (default 128).
	MaxTxnOps int
	// MaxRequestBytes is the etcd server's --max-request-bytes (default 1.5 MiB). Above the
	// default the client must also allow larger messages (clientv3.Config.MaxCallSendMsgSize).
	MaxRequestBytes int
}

// Defaults of Options, and etcd's.
const (
	DefaultPrefix          = "/allocd/"
	DefaultRequestTimeout  = 5 * time.Second
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 3 << 19 // 1.5 MiB
	// ListPage is how many keys one range read of a list returns.
	ListPage = 500
	// maxAttempts is how often a write whose reads changed under it is run.
	maxAttempts = 3
	// opOverhead is what one operation adds to a request beyond its key and value (field
	// tags, lengths, the request's envelope), generously.
	opOverhead = 32
	// schemaVersion is written under the prefix, over an older one; a newer one is refused.
	// 2: history records longer than store.HistoryPartSize are stored in parts.
	schemaVersion = 2
)

// ErrTooLarge is matched by the error of a write that does not fit in one etcd transaction:
// it is store.ErrTooLarge.
var ErrTooLarge = store.ErrTooLarge

// ErrConflict is matched by the error of a write whose reads kept changing under it.
var ErrConflict = errors.New("the records it read were changed by another writer")

// errNoFence is the cause of a write made with no fence set.
var errNoFence = fmt.Errorf("%w (no election won: no fence set)", store.ErrFenced)

// Store is the daemon's state in etcd, under a key prefix. See the package comment.
type Store struct {
	cli  *clientv3.Client
	opts Options
	p    string

	fence  atomic.Pointer[fence]
	wmu    sync.Mutex // serializes writes
	ctx    context.Context
	cancel context.CancelFunc
	// upgradedFrom is the schema version under the prefix when Open wrote the current one
	// over it; 0 when it needed none.
	upgradedFrom int
}

// UpgradedFrom is the schema version under the prefix when Open upgraded it to this version's,
// or 0 when it needed no upgrade (or another replica upgraded it first). From then on an allocd
// older than this one refuses the prefix.
func (s *Store) UpgradedFrom() int { return s.upgradedFrom }

type fence struct {
	key string
	rev int64
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.GenerationTx = (*Store)(nil)
	_ store.TopicTx      = (*Store)(nil)
)

// Open opens the store under opts.Prefix through cli (which the caller keeps and closes) and
// checks the schema version kept there, writing it on first use. ctx bounds Open only.
func Open(ctx context.Context, cli *clientv3.Client, opts Options) (*Store, error) {
	if cli == nil {
		return nil, &store.Error{Op: "open etcd", Err: errors.New("no etcd client")}
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	s := &Store{cli: cli, opts: opts, p: opts.Prefix}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.init(ctx); err != nil {
		s.cancel()
		return nil, &store.Error{Op: fmt.Sprintf("open etcd %s prefix %q", strings.Join(cli.Endpoints(), ","), s.p), Err: err}
	}
	return s, nil
}

// init writes the schema version if there is none (a create-only transaction, the one write
// that needs no fence: every replica writes the same), writes it over an older one, and
// refuses a newer one.
func (s *Store) init(ctx context.Context) error {
	key := s.p + "meta/schema"
	cctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(schemaVersion))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return s.etcdErr(err, false)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	n, err := strconv.Atoi(string(kvs[0].Value))
	if err != nil || n > schemaVersion {
		return fmt.Errorf("key %q has schema version %q; this allocd reads up to %d", key, kvs[0].Value, schemaVersion)
	}
	if n < schemaVersion {
		// An older schema reads as it is; the new one is written over it, only if it is still
		// the value read (another replica may have written it first).
		uctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		defer cancel()
		resp, err := s.cli.Txn(uctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, strconv.Itoa(schemaVersion))).Commit()
		if err != nil {
			return s.etcdErr(err, false)
		}
		if resp.Succeeded {
			s.upgradedFrom = n
		}
	}
	return nil
}

// Prefix is the key prefix of the store's records.
func (s *Store) Prefix() string { return s.p }

// SetFence makes writes succeed only while key exists with this create revision (the
// election key and revision a leader won with: concurrency.Election's Key and Rev).
func (s *Store) SetFence(key string, createRevision int64) {
	s.fence.Store(&fence{key: key, rev: createRevision})
}

// ClearFence makes every later write fail with store.ErrFenced, until SetFence.
func (s *Store) ClearFence() { s.fence.Store(nil) }

// Close makes later calls fail; the client stays open (it is the caller's).
func (s *Store) Close() error {
	s.cancel()
	return nil
}

// Key layout: see RATIONALE.md ("etcd key layout").
func (s *Store) topicKey(name string) string { return s.p + "topics/" + name }
func (s *Store) groupKey(name string) string { return s.p + "groups/" + name }
func (s *Store) genKey(group, topic string) string {
	return s.p + "generations/" + store.GenerationKey(group, topic)
}
func (s *Store) genGroupPrefix(group string) string { return s.p + "generations/" + group + "\x00" }
func (s *Store) bucketPrefix(bucket string) string  { return s.p + "buckets/" + bucket + "/" }
func (s *Store) seqKey(bucket string) string        { return s.p + "seq/" + bucket }

func (s *Store) PutTopic(t store.Topic) error { return s.PutTopicTx(t, nil) }

func (s *Store) PutTopicTx(t store.Topic, fn func(store.Tx) error) error {
	if err := store.CheckName("topic", t.Name); err != nil {
		return &store.Error{Op: "put topic", Err: err}
	}
	b, err := json.Marshal(t)
	if err != nil {
		return &store.Error{Op: fmt.Sprintf("put topic %q", t.Name), Err: err}
	}
	return s.update(fmt.Sprintf("put topic %q", t.Name), func(x *txn) error {
		x.put(s.topicKey(t.Name), b)
		return x.run(fn)
	})
}

func (s *Store) GetTopic(name string) (store.Topic, error) {
	var t store.Topic
	return t, store.Wrap(s.getJSON(s.topicKey(name), &t), "get topic %q", name)
}

func (s *Store) DeleteTopic(name string) error { return s.DeleteTopicTx(name, nil) }

func (s *Store) DeleteTopicTx(name string, fn func(store.Tx) error) error {
	return s.update(fmt.Sprintf("delete topic %q", name), func(x *txn) error {
		if err := x.deleteExisting(s.topicKey(name)); err != nil {
			return err
		}
		return x.run(fn)
	})
}

func (s *Store) ListTopics() ([]store.Topic, error) {
	ts, err := listJSON[store.Topic](s, s.p+"topics/")
	return ts, store.Wrap(err, "list topics")
}

func (s *Store) PutGroup(g store.Group) error {
	if err := store.CheckName("group", g.Name); err != nil {
		return &store.Error{Op: "put group", Err: err}
	}
	b, err := json.Marshal(g)
	if err != nil {
		return &store.Error{Op: fmt.Sprintf("put group %q", g.Name), Err: err}
	}
	return s.update(fmt.Sprintf("put group %q", g.Name), func(x *txn) error {
		x.put(s.groupKey(g.Name), b)
		return nil
	})
}

func (s *Store) GetGroup(name string) (store.Group, error) {
	var g store.Group
	return g, store.Wrap(s.getJSON(s.groupKey(name), &g), "get group %q", name)
}

// DeleteGroup removes the group and its generations: one delete and one range delete.
func (s *Store) DeleteGroup(name string) error {
	return s.update(fmt.Sprintf("delete group %q", name), func(x *txn) error {
		if err := x.deleteExisting(s.groupKey(name)); err != nil {
			return err
		}
		x.deletePrefix(s.genGroupPrefix(name))
		return nil
	})
}

func (s *Store) ListGroups() ([]store.Group, error) {
	gs, err := listJSON[store.Group](s, s.p+"groups/")
	return gs, store.Wrap(err, "list groups")
}

func (s *Store) PutGenerations(gens ...store.Generation) error {
	if len(gens) == 0 {
		return nil
	}
	return s.PutGenerationsTx(gens, nil)
}

func (s *Store) PutGenerationsTx(gens []store.Generation, fn func(store.Tx) error) error {
	vals, err := store.EncodeGenerations(gens)
	if err != nil {
		return err
	}
	return s.update(fmt.Sprintf("put %d generations", len(gens)), func(x *txn) error {
		for i, g := range gens {
			x.put(s.genKey(g.Group, g.Topic), vals[i])
		}
		return x.run(fn)
	})
}

func (s *Store) ListGenerations() ([]store.Generation, error) {
	gs, err := listJSON[store.Generation](s, s.p+"generations/")
	return gs, store.Wrap(err, "list generations")
}

func (s *Store) Update(fn func(store.Tx) error) error {
	return s.update("update", func(x *txn) error { return fn(bucketTx{x}) })
}

func (s *Store) View(fn func(store.Tx) error) error {
	if err := s.ctx.Err(); err != nil {
		return &store.Error{Op: "view", Err: errClosed}
	}
	return store.Wrap(fn(bucketTx{&txn{s: s}}), "view")
}

var errClosed = errors.New("the store is closed")

// update runs build in a new write transaction and commits it, again (up to maxAttempts) if
// what it read changed before the commit. A transaction that writes nothing needs no fence.
func (s *Store) update(op string, build func(*txn) error) error {
	if s.ctx.Err() != nil {
		return &store.Error{Op: op, Err: errClosed}
	}
	s.wmu.Lock()
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		x := &txn{s: s, writable: true}
		if err = build(x); err == nil {
			err = x.commit()
		}
		if !errors.Is(err, ErrConflict) {
			break
		}
	}
	s.wmu.Unlock()
	err = store.Wrap(err, "%s", op)
	// Called without the write lock: the callback may step down, clear the fence, log.
	var lf *lostFence
	if errors.As(err, &lf) && s.opts.OnFenced != nil {
		s.opts.OnFenced(err)
	}
	return err
}

// call is the context of one etcd call.
func (s *Store) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.opts.RequestTimeout)
}

// etcdErr makes an etcd client error say what happened in the daemon's terms.
func (s *Store) etcdErr(err error, write bool) error {
	if err == nil {
		return nil
	}
	eps := strings.Join(s.cli.Endpoints(), ",")
	switch {
	case s.ctx.Err() != nil:
		return errClosed
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrTooManyOps),
		status.Code(err) == codes.ResourceExhausted && !errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("%w: etcd refused it: %v", ErrTooLarge, err)
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded,
		status.Code(err) == codes.Unavailable:
		msg := fmt.Sprintf("etcd at %s did not answer within %v (is it running and reachable?)", eps, s.opts.RequestTimeout)
		if write {
			msg += "; the write may or may not have been applied"
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	return fmt.Errorf("etcd at %s: %w", eps, err)
}

func (s *Store) getJSON(key string, v any) error {
	kv, _, err := s.getKV(key)
	if err != nil {
		return err
	}
	if kv == nil {
		return store.ErrNotFound
	}
	return decodeJSON(kv, v)
}

// getKV reads key (nil if absent) and the revision it was read at.
func (s *Store) getKV(key string) (*mvccpb.KeyValue, int64, error) {
	ctx, cancel := s.call()
	defer cancel()
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, s.etcdErr(err, false)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, nil
	}
	return resp.Kvs[0], resp.Header.Revision, nil
}

func decodeJSON(kv *mvccpb.KeyValue, v any) error {
	if err := json.Unmarshal(kv.Value, v); err != nil {
		return fmt.Errorf("record %q is damaged: %w", kv.Key, err)
	}
	return nil
}

func listJSON[T any](s *Store, prefix string) ([]T, error) {
	var out []T
	_, err := s.scan(prefix, clientv3.GetPrefixRangeEnd(prefix), 0, false, func(kv *mvccpb.KeyValue) error {
		var t T
		if err := decodeJSON(kv, &t); err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// scan calls fn for every key in [start, end) at revision rev (0: the newest, returned), in
// key order, reading ListPage keys at a time.
func (s *Store) scan(start, end string, rev int64, keysOnly bool, fn func(*mvccpb.KeyValue) error) (int64, error) {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(ListPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		ctx, cancel := s.call()
		resp, err := s.cli.Get(ctx, start, opts...)
		cancel()
		if err != nil {
			return rev, s.etcdErr(err, false)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return rev, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
