package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/etcdtest"
	"github.com/allocd/allocd/store"
	"github.com/allocd/allocd/store/etcdstore"
)

// A rebalance that publishes more generations than etcd takes in one transaction (128
// operations: each generation is a put, its history entry another) stores them in smaller
// transactions, each generation with its history entry, instead of failing every time.
func TestManyGenerationsOnEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := etcdstore.Open(ctx, cli, etcdstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	resp, err := cli.Txn(ctx).Then(clientv3.OpPut("/allocd/leader", "me")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	st.SetFence("/allocd/leader", resp.Header.Revision)

	env := newEnv(t, func(o *coordinator.Options) { o.Store = st })
	const n = 100
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("T%03d", i)
		env.topic(topics[i], 2)
	}
	env.group("g", "averagely")
	env.hb("g", "c1", topics...)
	env.advance(time.Second)
	gens, err := st.ListGenerations()
	if err != nil || len(gens) != n {
		t.Fatalf("%d generations stored, %v; want %d", len(gens), err, n)
	}
	var history int
	if err := st.View(func(tx store.Tx) error {
		return tx.List(store.HistoryBucket, "", func(string, []byte) error { history++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if history != n {
		t.Fatalf("%d history entries for %d published generations", history, n)
	}
	if s := env.status("g").Topics["T099"]; s.Generation != 1 || s.Error != "" {
		t.Fatalf("T099: %+v", s)
	}
}
