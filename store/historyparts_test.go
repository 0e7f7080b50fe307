package store_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/store"
)

// FuzzHistoryParts writes history keys of every shape under one (group, topic), as a damaged or
// foreign bucket may hold them: records' own keys, parts in and out of order or without their
// record, keys of neither shape, and values around the part size. ListHistory then either
// names a key in its error or gives records in generation order, each the same bytes GetHistory
// gives; TrimHistory leaves the newest record, and no part of the records it dropped.
func FuzzHistoryParts(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 1, 1, 3, 2, 0})
	f.Add([]byte{9, 5, 0, 10, 5, 1, 4, 5, 2, 0, 6, 0})
	f.Add([]byte{1, 7, 1, 2, 9, 9})
	s, err := store.Open(f.TempDir(), store.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	sizes := []int{0, 10, store.HistoryPartSize - 1, store.HistoryPartSize, store.HistoryPartSize + 5}
	f.Fuzz(func(t *testing.T, data []byte) {
		prefix := store.HistoryPrefix("g", "T")
		written := map[int64]bool{}
		err := s.Update(func(tx store.Tx) error {
			if err := store.DeleteHistory(tx, "g"); err != nil {
				return err
			}
			for i := 0; i+2 < len(data) && i < 3*32; i += 3 {
				kind, a, b := data[i], data[i+1], data[i+2]
				key := store.HistoryKey("g", "T", int64(a))
				switch kind % 3 {
				case 0:
					written[int64(a)] = true
				case 1:
					key += "\x00" + fmt.Sprintf("%08x", b)
				default:
					key = prefix + string([]byte{a, b})
				}
				value := bytes.Repeat([]byte{b}, sizes[int(kind/3)%len(sizes)])
				if err := tx.Put(store.HistoryBucket, key, value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var numbers []int64
		var values [][]byte
		err = s.View(func(tx store.Tx) error {
			return store.ListHistory(tx, "g", "T", func(n int64, value []byte) error {
				numbers, values = append(numbers, n), append(values, slices.Clone(value))
				return nil
			})
		})
		if err != nil {
			if !strings.Contains(err.Error(), "history key ") {
				t.Fatalf("ListHistory's error names no key: %v", err)
			}
			return
		}
		for i, n := range numbers {
			if i > 0 && n <= numbers[i-1] || !written[n] {
				t.Fatalf("ListHistory gave generations %v; written %v", numbers, written)
			}
			err := s.View(func(tx store.Tx) error {
				v, ok, err := store.GetHistory(tx, "g", "T", n)
				if err != nil || !ok || !bytes.Equal(v, values[i]) {
					t.Fatalf("generation %d: GetHistory gave %d bytes, %v, %v; ListHistory %d bytes", n, len(v), ok, err, len(values[i]))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(numbers) == 0 {
			return
		}
		err = s.Update(func(tx store.Tx) error {
			_, err := store.TrimHistory(tx, "g", "T", store.Retention{Count: 1}, time.Now(), store.RecordTime)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var left []int64
		err = s.View(func(tx store.Tx) error {
			return store.ListHistory(tx, "g", "T", func(n int64, _ []byte) error {
				left = append(left, n)
				return nil
			})
		})
		if err != nil || !slices.Equal(left, numbers[len(numbers)-1:]) {
			t.Fatalf("after trimming to one record: %v, %v; want [%d]", left, err, numbers[len(numbers)-1])
		}
	})
}
