package store

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	vals, err := encodeGenerations(gens)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := putGenerations(tx, gens, vals); err != nil {
			return err
		}
		return fn(boltTx{tx})
	})
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

// TrimHistory deletes the records of a (group, topic) that Retention does not keep. at reads a
// record's time; a record it cannot read counts as old.
func TrimHistory(tx Tx, group, topic string, r Retention, now time.Time, at func(value []byte) (time.Time, error)) (int, error) {
	prefix := HistoryPrefix(group, topic)
	var keys []string
	err := tx.List(HistoryBucket, prefix, func(key string, _ []byte) error {
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		return 0, err
	}
	drop := 0
	if r.Count > 0 && len(keys) > r.Count {
		drop = len(keys) - r.Count
	}
	// Records are kept oldest first: only those from the first kept one on are read, and
	// reading stops at the first that is recent enough (a record may be megabytes long).
	cutoff := now.Add(-r.MaxAge)
	for r.MaxAge > 0 && drop < len(keys)-1 {
		value, ok, err := tx.Get(HistoryBucket, keys[drop])
		if err != nil {
			return 0, err
		}
		if ok {
			if t, err := at(value); err == nil && !t.Before(cutoff) {
				break
			}
		}
		drop++
	}
	if rd, ok := tx.(RangeDeleter); ok && drop > 0 {
		// The oldest records are a run of keys: keys[drop] is the first one kept.
		return drop, rd.DeleteRange(HistoryBucket, keys[0], keys[drop])
	}
	for _, k := range keys[:drop] {
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
