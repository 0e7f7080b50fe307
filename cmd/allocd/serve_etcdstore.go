package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/registry"
	"github.com/allocd/allocd/store/etcdstore"
)

// openEtcdStore opens the store on etcd under prefix, and the plugin keeper beside it (fenced
// like the store); etcd must answer within two timeouts.
func openEtcdStore(ctx context.Context, cli *clientv3.Client, prefix string, timeout time.Duration, onFenced func(error)) (fencedStore, registry.Keeper, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	st, err := etcdstore.Open(ctx, cli, etcdstore.Options{Prefix: prefix, RequestTimeout: timeout, OnFenced: onFenced})
	if err != nil {
		return nil, nil, err
	}
	return st, etcdstore.NewKeeper(st), nil
}
