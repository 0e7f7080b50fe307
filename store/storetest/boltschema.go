package storetest

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/allocd/allocd/store"
)

// BoltSchema returns the schema version written in the bbolt store file of dir, which no store
// may hold open, and writes set in its place when set is not empty: a test makes a file of
// another version this way.
func BoltSchema(t testing.TB, dir, set string) string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		v = string(meta.Get([]byte("schema")))
		if set != "" {
			return meta.Put([]byte("schema"), []byte(set))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
