package etcdstore_test

import (
	"fmt"
	"testing"

	"github.com/allocd/allocd/internal/etcdtest"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/store/etcdstore"
	"github.com/allocd/allocd/store/storetest"
)

// One write (a topic) and one read, the etcd store next to the bbolt file, both syncing to
// disk on commit.
func BenchmarkWriteRead(b *testing.B) {
	e := etcdtest.Start(b)
	cli := e.Client(b)
	bolt, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bolt.Close() })
	stores := []struct {
		name string
		s    storetest.Store
	}{{"bolt", bolt}, {"etcd", openLeader(b, cli, "/bench/")}}
	for _, c := range stores {
		b.Run("put/"+c.name, func(b *testing.B) {
			for i := range b.N {
				if err := c.s.PutTopic(store.Topic{Name: fmt.Sprintf("T%d", i%100), Brokers: []store.Broker{{Name: "b", ReadQueues: 8, WriteQueues: 8}}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+c.name, func(b *testing.B) {
			for range b.N {
				if _, err := c.s.GetTopic("T1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Keeping and reading back a 16 MiB module (32 chunks); each Keep is a new version.
func BenchmarkKeeper16MiB(b *testing.B) {
	e := etcdtest.Start(b)
	cli := e.Client(b)
	k := etcdstore.NewKeeper(openLeader(b, cli, "/allocd/"))
	mods := [][]byte{module(16<<20, 1), module(16<<20, 2)}
	b.Run("keep", func(b *testing.B) {
		b.SetBytes(16 << 20)
		for i := range b.N {
			m := mods[i%2]
			if err := k.Keep("p", hashOf(m), m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kept", func(b *testing.B) {
		b.SetBytes(16 << 20)
		for range b.N {
			if _, _, ok, err := k.Kept("p"); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}
