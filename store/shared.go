package store

import (
	"errors"
	"fmt"
)

// ErrFenced is matched (errors.Is) by the error of a write to a shared store (etcd) made by a
// replica that is not, or no longer, the leader: its fence (the election key it won with) is
// gone or was never set. Nothing was written.
var ErrFenced = errors.New("fenced: this replica is not the leader")

// ErrTooLarge is matched by the error of a write that a shared store cannot make in one
// transaction (etcd takes 128 operations and 1.5 MiB by default). Nothing was written; the
// same records in smaller writes may fit.
var ErrTooLarge = errors.New("too large for one transaction")

// The helpers below let a store in another package (store/etcdstore) keep this package's names,
// key layout and errors.

// CheckName refuses a topic or group name the key layout cannot hold (empty, or with a NUL).
func CheckName(kind, name string) error { return checkName(kind, name) }

// CheckBucket returns the error a generic-bucket call on bucket gets: an empty name, or a
// bucket the typed records use (matching ErrReserved). nil for a usable bucket.
func CheckBucket(name string) error {
	if name == "" {
		return &Error{Op: "bucket", Err: errors.New("empty bucket name")}
	}
	if reserved(name) {
		return &Error{Op: fmt.Sprintf("bucket %q", name), Err: ErrReserved}
	}
	return nil
}

// GenerationKey is the key of a (group, topic)'s generation: group, a NUL byte, topic.
func GenerationKey(group, topic string) string { return generationKey(group, topic) }

// Wrap returns err as an *Error naming the operation (format and args), unless it is nil or
// an *Error already.
func Wrap(err error, format string, args ...any) error { return opErr(err, format, args...) }

// RangeDeleter is implemented by a Tx that can remove every key k of a bucket with
// from <= k < to (to "": to the bucket's end) in one operation (etcd's range delete), rather
// than one delete per key.
type RangeDeleter interface {
	DeleteRange(bucket, from, to string) error
}

// PrefixEnd is the first key after every key that starts with prefix ("" if there is none:
// the prefix is empty or all 0xff bytes).
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// EncodeGenerations checks the names of gens and encodes their records, as every store
// writes them (packed: packed.go).
func EncodeGenerations(gens []Generation) ([][]byte, error) { return encodeGenerations(gens, nil) }
