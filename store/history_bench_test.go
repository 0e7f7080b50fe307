package store_test

import (
	"math/rand/v2"
	"testing"

	"github.com/allocd/allocd/store"
)

// BenchmarkHistoryCommit is one commit of a large group's generation, in the shape of
// BenchmarkLargeGroup's averagely (10,000 members, 100,000 queues): a 0.75 MB record and a
// 1.3 MB history record, into a file that holds 20 such commits already. "one-key" writes the
// history record under its key alone, as schema 1 did; "parts" writes it with PutHistory. The
// bytes a commit allocates are mostly bbolt's page buffers: the leaves it writes again.
func BenchmarkHistoryCommit(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	record, history := random(750_000), random(1_300_000)
	for _, way := range []struct {
		name string
		put  func(tx store.Tx, n int64) error
	}{
		{"one-key", func(tx store.Tx, n int64) error {
			return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", n), history)
		}},
		{"parts", func(tx store.Tx, n int64) error { return store.PutHistory(tx, "g", "T", n, history) }},
	} {
		b.Run(way.name, func(b *testing.B) {
			s, err := store.Open(b.TempDir(), store.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			n := int64(0)
			commit := func() {
				n++
				err := s.Update(func(tx store.Tx) error {
					if err := tx.Put("records", "g\x00T", record); err != nil {
						return err
					}
					return way.put(tx, n)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			for range 20 {
				commit()
			}
			b.ReportAllocs()
			for b.Loop() {
				commit()
			}
		})
	}
}
