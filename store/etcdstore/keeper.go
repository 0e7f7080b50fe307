package etcdstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/store"
)

// ChunkSize is the size of the pieces a kept module is stored in: each is one put, well under
// etcd's 1.5 MiB request limit.
const ChunkSize = 512 << 10

// MaxModule bounds a kept module, and what Kept allocates for one (the registry takes
// modules up to 16 MiB).
const MaxModule = 64 << 20

// Keeper is registry.Keeper in etcd, so that every replica serves the same validated plugin
// versions. A module is stored as content-addressed chunks (PREFIX chunks/SHA256, each written
// once, fenced), then one small fenced transaction points PREFIX plugins/NAME at them, comparing
// that every chunk is still there. A reader reads the pointer and then its chunks at the
// pointer's revision, so it sees one whole version or the one before, never a mix; chunks no
// version points at any more are removed after each Keep and Forget.
type Keeper struct {
	s  *Store
	mu sync.Mutex // one Keep, Forget or removal of chunks at a time
}

var _ registry.Keeper = (*Keeper)(nil)

// NewKeeper keeps plugin versions in s: under its prefix, fenced as its writes are.
func NewKeeper(s *Store) *Keeper { return &Keeper{s: s} }

func (k *Keeper) pointerKey(name string) string { return k.s.p + "plugins/" + name }
func (k *Keeper) chunkKey(hash string) string   { return k.s.p + "chunks/" + hash }

// version is the record PREFIX plugins/NAME: the module's hash and size and its chunks' hashes.
type version struct {
	Hash   string   `json:"hash"`
	Size   int      `json:"size"`
	Chunks []string `json:"chunks"`
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeVersion reads a pointer record, refusing one that could not have been written.
func decodeVersion(key string, b []byte) (version, error) {
	var v version
	if err := json.Unmarshal(b, &v); err != nil {
		return version{}, fmt.Errorf("kept version record %q is damaged: %w", key, err)
	}
	bad := ""
	switch {
	case !isHash(v.Hash):
		bad = "its hash is not a SHA-256 in hex"
	case v.Size <= 0 || v.Size > MaxModule:
		bad = fmt.Sprintf("its size %d is not in 1..%d", v.Size, MaxModule)
	case len(v.Chunks) == 0 || len(v.Chunks) > v.Size:
		bad = fmt.Sprintf("%d chunks for %d bytes", len(v.Chunks), v.Size)
	}
	for _, c := range v.Chunks {
		if bad == "" && !isHash(c) {
			bad = fmt.Sprintf("chunk %q is not a SHA-256 in hex", truncate([]byte(c), 70))
		}
	}
	if bad != "" {
		return version{}, fmt.Errorf("kept version record %q is damaged: %s", key, bad)
	}
	return v, nil
}

func (k *Keeper) Keep(name, hash string, module []byte) error {
	op := fmt.Sprintf("keep plugin %q", name)
	if err := store.CheckName("plugin", name); err != nil {
		return &store.Error{Op: "keep plugin", Err: err}
	}
	switch {
	case len(module) == 0:
		return &store.Error{Op: op, Err: errors.New("empty module")}
	case len(module) > MaxModule:
		return &store.Error{Op: op, Err: fmt.Errorf("the module is %s, over the %s a kept version may be", sizeString(len(module)), sizeString(MaxModule))}
	case hashOf(module) != hash:
		return &store.Error{Op: op, Err: fmt.Errorf("the module's bytes do not match hash %s", hash)}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kv, _, err := k.s.getKV(k.pointerKey(name))
	if err != nil {
		return store.Wrap(err, "%s", op)
	}
	if kv != nil {
		// Kept already: every start loads the same versions again. A damaged record is
		// replaced.
		if cur, err := decodeVersion(string(kv.Key), kv.Value); err == nil && cur.Hash == hash {
			return nil
		}
	}
	if k.s.fence.Load() == nil {
		return &store.Error{Op: op, Err: errNoFence}
	}
	v := version{Hash: hash, Size: len(module)}
	for off := 0; off < len(module); off += ChunkSize {
		c := module[off:min(off+ChunkSize, len(module))]
		h := hashOf(c)
		v.Chunks = append(v.Chunks, h)
		key := k.chunkKey(h)
		err := k.s.update(op, func(x *txn) error {
			// A chunk there already is shared with another version; one whose bytes do
			// not match its name (damaged) is written again.
			if old, ok, err := x.get(key, false); err != nil || ok && hashOf(old) == h {
				return err
			}
			x.put(key, c)
			return nil
		})
		if err != nil {
			return err
		}
	}
	rec, err := json.Marshal(v)
	if err != nil {
		return &store.Error{Op: op, Err: err}
	}
	err = k.s.update(op, func(x *txn) error {
		for _, h := range v.Chunks {
			// Read (keys only), so the commit compares that the chunk is still there.
			if _, ok, err := x.get(k.chunkKey(h), true); err != nil || !ok {
				return errors.Join(err, fmt.Errorf("%w: chunk %s was removed", ErrConflict, h))
			}
		}
		x.put(k.pointerKey(name), rec)
		return nil
	})
	if err != nil {
		return err
	}
	k.removeUnused()
	return nil
}

func (k *Keeper) Kept(name string) ([]byte, string, bool, error) {
	op := fmt.Sprintf("read kept plugin %q", name)
	for attempt := 1; ; attempt++ {
		b, hash, ok, err := k.read(name)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < maxAttempts {
			continue // the version was replaced and its revision compacted meanwhile
		}
		return b, hash, ok, store.Wrap(err, "%s", op)
	}
}

func (k *Keeper) read(name string) ([]byte, string, bool, error) {
	kv, rev, err := k.s.getKV(k.pointerKey(name))
	if err != nil || kv == nil {
		return nil, "", false, err
	}
	v, err := decodeVersion(string(kv.Key), kv.Value)
	if err != nil {
		return nil, "", false, err
	}
	buf := make([]byte, 0, v.Size)
	for _, h := range v.Chunks {
		key := k.chunkKey(h)
		ctx, cancel := k.s.call()
		resp, err := k.s.cli.Get(ctx, key, clientv3.WithRev(rev))
		cancel()
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil, "", false, err
		}
		if err != nil {
			return nil, "", false, k.s.etcdErr(err, false)
		}
		if len(resp.Kvs) == 0 {
			return nil, "", false, fmt.Errorf("chunk %q of the kept version is missing", key)
		}
		c := resp.Kvs[0].Value
		if hashOf(c) != h {
			return nil, "", false, fmt.Errorf("chunk %q of the kept version is damaged: its bytes do not match its name", key)
		}
		if len(buf)+len(c) > v.Size {
			return nil, "", false, fmt.Errorf("kept version %q: its chunks hold more than its %d bytes", kv.Key, v.Size)
		}
		buf = append(buf, c...)
	}
	if len(buf) != v.Size || hashOf(buf) != v.Hash {
		return nil, "", false, fmt.Errorf("kept version %q: its chunks do not make the module it names", kv.Key)
	}
	return buf, v.Hash, true, nil
}

func (k *Keeper) Forget(name string) error {
	op := fmt.Sprintf("forget plugin %q", name)
	k.mu.Lock()
	defer k.mu.Unlock()
	if kv, _, err := k.s.getKV(k.pointerKey(name)); err != nil || kv == nil {
		return store.Wrap(err, "%s", op) // none kept: nothing to write
	}
	err := k.s.update(op, func(x *txn) error {
		x.del(k.pointerKey(name))
		return nil
	})
	if err != nil {
		return err
	}
	k.removeUnused()
	return nil
}

func (k *Keeper) Names() ([]string, error) {
	pfx := k.s.p + "plugins/"
	var names []string
	_, err := k.s.scan(pfx, clientv3.GetPrefixRangeEnd(pfx), 0, true, func(kv *mvccpb.KeyValue) error {
		names = append(names, strings.TrimPrefix(string(kv.Key), pfx))
		return nil
	})
	return names, store.Wrap(err, "list kept plugins")
}

// removeUnused deletes the chunks no pointer names (those of replaced or forgotten versions,
// and those a Keep cut short left), at most MaxTxnOps per transaction. It is best-effort: a
// chunk left behind costs space only and goes with the next Keep or Forget.
func (k *Keeper) removeUnused() {
	for range 16 {
		n, err := k.removeSomeUnused()
		if err != nil || n < k.s.opts.MaxTxnOps {
			return
		}
	}
}

func (k *Keeper) removeSomeUnused() (int, error) {
	n := 0
	errFull := errors.New("full")
	err := k.s.update("remove unused plugin chunks", func(x *txn) error {
		n = 0
		used := map[string]bool{}
		ppfx, cpfx := k.s.p+"plugins/", k.s.p+"chunks/"
		err := x.listRange(ppfx, clientv3.GetPrefixRangeEnd(ppfx), false, func(key string, value []byte) error {
			v, err := decodeVersion(key, value)
			if err != nil {
				return err // never guess what a damaged record pointed at
			}
			for _, c := range v.Chunks {
				used[c] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		err = x.listRange(cpfx, clientv3.GetPrefixRangeEnd(cpfx), true, func(key string, _ []byte) error {
			if !used[strings.TrimPrefix(key, cpfx)] {
				if n == k.s.opts.MaxTxnOps {
					return errFull
				}
				x.del(key)
				n++
			}
			return nil
		})
		if errors.Is(err, errFull) {
			err = nil
		}
		return err
	})
	return n, err
}
