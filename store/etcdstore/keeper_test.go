package etcdstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/internal/etcdtest"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/store/etcdstore"
)

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// module returns n deterministic bytes that differ with seed and do not repeat within a chunk.
func module(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func chunkKeys(t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	resp, err := cli.Get(ctx(t), "/allocd/chunks/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// A 16 MiB module (far over etcd's request limit) round-trips, a replica without the fence
// reads the same bytes, a new version replaces it leaving no chunk of the old one, keeping the
// same version again writes nothing, and Forget removes every chunk.
func TestKeeperRoundTrip(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	k := etcdstore.NewKeeper(openLeader(t, cli, "/allocd/"))
	follower := etcdstore.NewKeeper(open(t, cli, etcdstore.Options{}))

	v1 := module(16<<20, 1)
	if err := k.Keep("big", hashOf(v1), v1); err != nil {
		t.Fatal(err)
	}
	for name, kk := range map[string]*etcdstore.Keeper{"leader": k, "follower": follower} {
		b, h, ok, err := kk.Kept("big")
		if err != nil || !ok || h != hashOf(v1) || !bytes.Equal(b, v1) {
			t.Fatalf("%s: Kept = %d bytes, %s, %v, %v", name, len(b), h, ok, err)
		}
	}
	if n := len(chunkKeys(t, cli)); n != 32 {
		t.Fatalf("%d chunks for 16 MiB, want 32", n)
	}
	// A new version that differs in its first chunk only: one chunk replaced, 31 shared.
	v2 := bytes.Clone(v1)
	v2[0] ^= 0xff
	if err := k.Keep("big", hashOf(v2), v2); err != nil {
		t.Fatal(err)
	}
	if b, h, ok, err := follower.Kept("big"); err != nil || !ok || h != hashOf(v2) || !bytes.Equal(b, v2) {
		t.Fatalf("after a new version Kept = %s, %v, %v", h, ok, err)
	}
	keys := chunkKeys(t, cli)
	if len(keys) != 32 || slices.Contains(keys, "/allocd/chunks/"+hashOf(v1[:etcdstore.ChunkSize])) {
		t.Fatalf("after the new version %d chunks (want 32), the old first chunk left: %v", len(keys),
			slices.Contains(keys, "/allocd/chunks/"+hashOf(v1[:etcdstore.ChunkSize])))
	}
	// Kept already: nothing is written, so a follower (no fence) may call it too.
	rev := func() int64 {
		resp, err := cli.Get(ctx(t), "/allocd/none")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := rev()
	if err := follower.Keep("big", hashOf(v2), v2); err != nil {
		t.Fatal(err)
	}
	if err := follower.Keep("other", hashOf(v1[:10]), v1[:10]); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Keep of a new version by a follower: %v", err)
	}
	if after := rev(); after != before {
		t.Fatalf("Keep of a kept version wrote (revision %d -> %d)", before, after)
	}
	small := []byte("\x00asm\x01\x00\x00\x00")
	if err := k.Keep("small", hashOf(small), small); err != nil {
		t.Fatal(err)
	}
	if names, err := follower.Names(); err != nil || !slices.Equal(names, []string{"big", "small"}) {
		t.Fatalf("Names = %v, %v", names, err)
	}
	if err := k.Keep("bad", hashOf(small), v1[:100]); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Fatalf("Keep with a wrong hash: %v", err)
	}
	for _, name := range []string{"big", "small", "never-kept"} {
		if err := k.Forget(name); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, ok, err := k.Kept("big"); ok || err != nil {
		t.Fatalf("Kept after Forget: %v, %v", ok, err)
	}
	if keys := chunkKeys(t, cli); len(keys) != 0 {
		t.Fatalf("%d chunks left after Forget", len(keys))
	}
}

// While versions are replaced over and over, a reader always gets one whole version whose
// bytes match its hash: never a mix of two.
func TestKeeperReaderNeverSeesTornVersion(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	k := etcdstore.NewKeeper(openLeader(t, cli, "/allocd/"))
	reader := etcdstore.NewKeeper(open(t, cli, etcdstore.Options{}))
	versions := [][]byte{module(2<<20+100, 1), module(2<<20+100, 2), module(1<<20, 3)}
	if err := k.Keep("p", hashOf(versions[0]), versions[0]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var reads, torn atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, h, ok, err := reader.Kept("p")
				if err != nil || !ok {
					t.Errorf("Kept during replacements: %v, %v", ok, err)
					return
				}
				reads.Add(1)
				if hashOf(b) != h || !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, b) }) {
					torn.Add(1)
				}
			}
		}()
	}
	for i := range 30 {
		v := versions[(i+1)%len(versions)]
		if err := k.Keep("p", hashOf(v), v); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if torn.Load() > 0 || reads.Load() == 0 {
		t.Fatalf("%d of %d reads saw a torn version", torn.Load(), reads.Load())
	}
	t.Logf("%d reads during 30 replacements", reads.Load())
}

// A damaged pointer or chunk gives an error naming its key.
func TestKeeperDamaged(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	k := etcdstore.NewKeeper(openLeader(t, cli, "/allocd/"))
	v := module(etcdstore.ChunkSize+10, 5)
	if err := k.Keep("p", hashOf(v), v); err != nil {
		t.Fatal(err)
	}
	chunk := "/allocd/chunks/" + hashOf(v[:etcdstore.ChunkSize])
	if _, err := cli.Put(ctx(t), chunk, "not the bytes"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := k.Kept("p"); err == nil || !strings.Contains(err.Error(), chunk) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Kept with a damaged chunk: %v", err)
	}
	if _, err := cli.Put(ctx(t), "/allocd/plugins/p", `{"hash":"zz","size":3}`); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := k.Kept("p"); err == nil || !strings.Contains(err.Error(), `"/allocd/plugins/p"`) {
		t.Fatalf("Kept with a damaged pointer: %v", err)
	}
	// Keeping the version again mends it.
	if err := k.Keep("p", hashOf(v), v); err != nil {
		t.Fatal(err)
	}
	if b, _, ok, err := k.Kept("p"); err != nil || !ok || !bytes.Equal(b, v) {
		t.Fatalf("Kept after Keep over a damaged record: %v, %v", ok, err)
	}
}
