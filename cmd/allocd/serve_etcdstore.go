package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allocd/allocd/store/etcdstore"
)

// openEtcdStore opens the store on etcd under prefix; etcd must answer within two timeouts.
func openEtcdStore(ctx context.Context, cli *clientv3.Client, prefix string, timeout time.Duration, onFenced func(error)) (fencedStore, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	return etcdstore.Open(ctx, cli, etcdstore.Options{Prefix: prefix, RequestTimeout: timeout, OnFenced: onFenced})
}
