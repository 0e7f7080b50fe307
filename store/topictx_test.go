package store_test

import (
	"errors"
	"testing"

	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/store"
)

func TestTopicTx(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := autoscale.DefaultPolicy()
	p.Enabled = true
	topic := store.Topic{Name: "T", Brokers: []store.Broker{{Name: "b", ReadQueues: 2, WriteQueues: 1}}, Autoscale: &p}
	put := func(tx store.Tx) error { return tx.Put("autoscale", "T", []byte("state")) }
	if err := s.PutTopicTx(topic, put); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTopic("T")
	if err != nil || got.Autoscale == nil || *got.Autoscale != p || got.Brokers[0] != topic.Brokers[0] {
		t.Fatalf("GetTopic = %+v, %v", got, err)
	}
	// A failing fn writes nothing, the topic included.
	boom := errors.New("boom")
	topic.Brokers[0].ReadQueues = 9
	if err := s.PutTopicTx(topic, func(tx store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("PutTopicTx with a failing fn: %v", err)
	}
	if got, _ := s.GetTopic("T"); got.Brokers[0].ReadQueues != 2 {
		t.Fatalf("a failed PutTopicTx wrote the topic: %+v", got)
	}
	if err := s.DeleteTopicTx("T", func(tx store.Tx) error { return tx.Delete("autoscale", "T") }); err != nil {
		t.Fatal(err)
	}
	var found bool
	s.View(func(tx store.Tx) error { _, found, err = tx.Get("autoscale", "T"); return err })
	if _, err := s.GetTopic("T"); !errors.Is(err, store.ErrNotFound) || found {
		t.Fatalf("after DeleteTopicTx: topic %v, state found %v", err, found)
	}
	if err := s.DeleteTopicTx("T", func(store.Tx) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteTopicTx of an absent topic: %v", err)
	}
	if err := s.PutTopicTx(store.Topic{Name: "T"}, func(tx store.Tx) error { return tx.Put("topics", "x", nil) }); !errors.Is(err, store.ErrReserved) {
		t.Fatalf("a typed bucket through the generic Tx: %v", err)
	}
}
