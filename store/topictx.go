package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// TopicTx is implemented by stores that can write a topic record and generic-bucket records
// in one transaction. The coordinator uses it when the store has it, so that a topic's queue
// counts and the auto-scaling state that changed them are never on disk one without the
// other; a store without it gets two transactions, topic first.
type TopicTx interface {
	// PutTopicTx writes t and runs fn in the same read-write transaction; nothing is written
	// if fn fails.
	PutTopicTx(t Topic, fn func(Tx) error) error
	// DeleteTopicTx removes the topic and runs fn in the same transaction, or returns an
	// error matching ErrNotFound.
	DeleteTopicTx(name string, fn func(Tx) error) error
}

var _ TopicTx = (*Bolt)(nil)

func (s *Bolt) PutTopicTx(t Topic, fn func(Tx) error) error {
	if err := checkName("topic", t.Name); err != nil {
		return &Error{Op: "put topic", Err: err}
	}
	b, err := json.Marshal(t)
	if err != nil {
		return &Error{Op: fmt.Sprintf("put topic %q", t.Name), Err: err}
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte(bucketTopics)).Put([]byte(t.Name), b); err != nil {
			return err
		}
		return fn(boltTx{tx})
	})
	return opErr(err, "put topic %q", t.Name)
}

func (s *Bolt) DeleteTopicTx(name string, fn func(Tx) error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketTopics))
		if b.Get([]byte(name)) == nil {
			return ErrNotFound
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		return fn(boltTx{tx})
	})
	return opErr(err, "delete topic %q", name)
}
