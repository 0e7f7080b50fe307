package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// GenerationTx is implemented by stores that can write generations and generic-bucket records
// in one transaction. The coordinator uses it to store a generation and its history entry
// together, so that no published generation is missing from the history after a crash; a store
// without it gets two transactions, generations first.
type GenerationTx interface {
	// PutGenerationsTx writes gens as PutGenerations does and runs fn in the same
	// transaction; nothing is written if fn fails.
	PutGenerationsTx(gens []Generation, fn func(Tx) error) error
}

var _ GenerationTx = (*Bolt)(nil)

func (s *Bolt) PutGenerationsTx(gens []Generation, fn func(Tx) error) error {
	vals, err := encodeGenerations(gens, &s.records)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := putGenerations(tx, gens, vals); err != nil {
			return err
		}
		return fn(boltTx{tx})
	})
	s.records.give(vals)
	return opErr(err, "put %d generations", len(gens))
}

// HistoryBucket is the generic bucket of the generation history. A record's key is
// HistoryPrefix(group, topic) followed by the generation number in 16 hex digits, so a prefix
// scan lists a (group, topic) oldest first.
const HistoryBucket = "history"

// HistoryPrefix is the key prefix of a (group, topic)'s history records.
func HistoryPrefix(group, topic string) string { return group + "\x00" + topic + "\x00" }

// HistoryGroupPrefix is the key prefix of every history record of a group.
func HistoryGroupPrefix(group string) string { return group + "\x00" }

// HistoryKey is the key of one history record.
func HistoryKey(group, topic string, number int64) string {
	return HistoryPrefix(group, topic) + fmt.Sprintf("%016x", uint64(number))
}

// HistoryPartSize is the most bytes of a history record that one key holds. A longer record is
// stored in parts: the first HistoryPartSize bytes under its HistoryKey, each next
// HistoryPartSize under the key followed by "\x00" and the part's number (1, 2, ...) in 8 hex
// digits, which sort right after it. A record of one key holds several records' worth of bytes
// in one bbolt leaf otherwise (a leaf keeps at least two keys), and every commit wrote the
// records sharing the new one's leaf again (RATIONALE.md, "Why a history record is stored in
// parts"). Records written by earlier versions, in one key of any length, read as before.
const HistoryPartSize = 64 << 10

// historyPartKey is the key of a record's part n (1 <= n < 2^32: a record of up to 256 TiB).
func historyPartKey(key string, n int) string { return key + "\x00" + fmt.Sprintf("%08x", uint32(n)) }

// historyPart reads a key under HistoryPrefix(group, topic), which is prefixLen bytes long: the
// key of its record, the record's generation number, and the part number, 0 for a record's own
// key. ok is false for a key of neither shape.
func historyPart(key string, prefixLen int) (record string, number int64, part int, ok bool) {
	if len(key) < prefixLen+16 {
		return "", 0, 0, false
	}
	n, err := strconv.ParseUint(key[prefixLen:prefixLen+16], 16, 63)
	if err != nil {
		return "", 0, 0, false
	}
	switch len(key) - prefixLen {
	case 16:
		return key, int64(n), 0, true
	case 16 + 1 + 8:
		if key[prefixLen+16] != 0 {
			return "", 0, 0, false
		}
		p, err := strconv.ParseUint(key[prefixLen+17:], 16, 32)
		if err != nil || p == 0 {
			return "", 0, 0, false
		}
		return key[:prefixLen+16], int64(n), int(p), true
	}
	return "", 0, 0, false
}

// PutHistory stores the history record of generation number of (group, topic): under its
// HistoryKey, in parts of HistoryPartSize when it is longer.
func PutHistory(tx Tx, group, topic string, number int64, value []byte) error {
	key := HistoryKey(group, topic, number)
	first := min(len(value), HistoryPartSize)
	if err := tx.Put(HistoryBucket, key, value[:first]); err != nil {
		return err
	}
	for n, off := 1, first; off < len(value); n, off = n+1, off+HistoryPartSize {
		if err := tx.Put(HistoryBucket, historyPartKey(key, n), value[off:min(off+HistoryPartSize, len(value))]); err != nil {
			return err
		}
	}
	return nil
}

// ListHistory calls fn with every history record of (group, topic), oldest first: its
// generation number and its bytes, parts joined. value is valid only during the call. A part
// without its record before it, or out of order, is an error naming its key: the bucket is
// damaged.
func ListHistory(tx Tx, group, topic string, fn func(number int64, value []byte) error) error {
	prefix := HistoryPrefix(group, topic)
	var (
		pending string // the key of a record whose parts are being joined in buf
		number  int64  // its generation number
		parts   int    // the parts of it joined so far
		buf     []byte
	)
	flush := func() error {
		if pending == "" {
			return nil
		}
		pending = ""
		return fn(number, buf)
	}
	err := tx.List(HistoryBucket, prefix, func(key string, value []byte) error {
		record, n, part, ok := historyPart(key, len(prefix))
		switch {
		case !ok:
			return nil // not a history key (none is written under this prefix)
		case part > 0:
			if record != pending || part != parts {
				return errPartAlone(key)
			}
			buf = append(buf, value...)
			parts++
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		if len(value) < HistoryPartSize { // whole: no part follows
			return fn(n, value)
		}
		pending, number, parts, buf = key, n, 1, append(buf[:0], value...)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// errPartAlone names a record's part found without its record or the parts before it.
func errPartAlone(key string) error {
	return fmt.Errorf("history key %q: a part without the parts before it", key)
}

// GetHistory returns the history record of generation number of (group, topic), parts joined,
// and whether there is one.
func GetHistory(tx Tx, group, topic string, number int64) ([]byte, bool, error) {
	key := HistoryKey(group, topic, number)
	value, ok, err := tx.Get(HistoryBucket, key)
	if err != nil || !ok || len(value) < HistoryPartSize {
		return value, ok, err
	}
	// One pass over the parts (a second would read them from etcd twice), the buffer doubled as
	// they come: append's growth of a large slice, about 1.25x a step, copied a 1.3 MB record
	// through 5.7 MB of buffers.
	next := 1
	err = tx.List(HistoryBucket, key+"\x00", func(k string, part []byte) error {
		if record, _, n, ok := historyPart(k, len(key)-16); ok && record == key {
			if n != next {
				return errPartAlone(k)
			}
			if cap(value)-len(value) < len(part) {
				value = slices.Grow(value, max(len(part), len(value)))
			}
			value = append(value, part...)
			next++
		}
		return nil
	})
	return value, true, err
}

// HistoryNumber reads the generation number back from a history key.
func HistoryNumber(key string) (int64, error) {
	if len(key) < 16 {
		return 0, fmt.Errorf("history key %q is too short", key)
	}
	n, err := strconv.ParseUint(key[len(key)-16:], 16, 63)
	if err != nil {
		return 0, fmt.Errorf("history key %q: %w", key, err)
	}
	return int64(n), nil
}

// Retention bounds the history kept per (group, topic): at most Count records, none older than
// MaxAge, but always the newest. Zero values keep without that bound.
type Retention struct {
	Count  int
	MaxAge time.Duration
}

// TrimHistory deletes the records of a (group, topic) that Retention does not keep, each with
// its parts. at reads a record's time; a record it cannot read counts as old.
func TrimHistory(tx Tx, group, topic string, r Retention, now time.Time, at func(value []byte) (time.Time, error)) (int, error) {
	prefix := HistoryPrefix(group, topic)
	var keys []string   // every history key, parts included, in order
	var records []int   // the index in keys of each record's own key
	var numbers []int64 // each record's generation number
	err := tx.List(HistoryBucket, prefix, func(key string, _ []byte) error {
		if _, n, part, ok := historyPart(key, len(prefix)); ok {
			if part == 0 {
				records, numbers = append(records, len(keys)), append(numbers, n)
			}
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	drop := 0
	if r.Count > 0 && len(records) > r.Count {
		drop = len(records) - r.Count
	}
	// Records are kept oldest first: only those from the first kept one on are read, and
	// reading stops at the first that is recent enough (a record may be megabytes long). A
	// record's first part usually holds its time; the whole record is read when it does not.
	cutoff := now.Add(-r.MaxAge)
	for r.MaxAge > 0 && drop < len(records)-1 {
		key := keys[records[drop]]
		value, ok, err := tx.Get(HistoryBucket, key)
		if err != nil {
			return 0, err
		}
		if ok {
			t, err := at(value)
			if err != nil && len(value) >= HistoryPartSize {
				if value, _, err = GetHistory(tx, group, topic, numbers[drop]); err == nil {
					t, err = at(value)
				}
			}
			if err == nil && !t.Before(cutoff) {
				break
			}
		}
		drop++
	}
	if drop == 0 {
		return 0, nil
	}
	// The dropped records and their parts are the keys before the first kept record's (the
	// newest record is always kept).
	end := records[drop]
	if rd, ok := tx.(RangeDeleter); ok {
		return drop, rd.DeleteRange(HistoryBucket, keys[0], keys[end])
	}
	for _, k := range keys[:end] {
		if err := tx.Delete(HistoryBucket, k); err != nil {
			return 0, err
		}
	}
	return drop, nil
}

// DeleteHistory removes every history record of a group.
func DeleteHistory(tx Tx, group string) error {
	if rd, ok := tx.(RangeDeleter); ok {
		p := HistoryGroupPrefix(group)
		return rd.DeleteRange(HistoryBucket, p, PrefixEnd(p))
	}
	var keys []string
	if err := tx.List(HistoryBucket, HistoryGroupPrefix(group), func(key string, _ []byte) error {
		keys = append(keys, key)
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(HistoryBucket, k); err != nil {
			return err
		}
	}
	return nil
}

// RecordTime reads the "at" field of a JSON history record, for TrimHistory. It reads the
// record only up to that field.
func RecordTime(value []byte) (time.Time, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return time.Time{}, fmt.Errorf("history record is not a JSON object")
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return time.Time{}, err
		}
		if name == "at" {
			var at time.Time
			err := dec.Decode(&at)
			return at, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return time.Time{}, err
		}
	}
	return time.Time{}, fmt.Errorf("history record has no \"at\" field")
}
