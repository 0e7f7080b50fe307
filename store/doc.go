// Package store keeps the daemon's durable state: topics, groups with their strategy bindings,
// the last generation of every (group, topic), and generic buckets that other parts of the daemon
// (autoscale's pending steps, lock leases and fencing tokens) use for their own records.
//
// Store is one interface over the embedded file store (Bolt, a bbolt file in the data folder)
// and the shared one of several replicas (store/etcdstore, in etcd, whose writes only the
// leader makes and that fail with ErrFenced once it is no longer leader). Every write is one transaction
// that is on disk (fsync) when it returns, so a record survives kill -9; a write that fails (a
// full disk, a read-only file) changes nothing and returns an error that unwraps to its cause
// (errors.Is(err, syscall.ENOSPC)).
//
// Records are JSON, so a field added later reads as its zero value from an older file. A
// change that an older allocd would misread raises the schema version, which Open writes into
// the file (or under the etcd prefix) and an older allocd refuses: schema 2 stores a history
// record longer than HistoryPartSize in parts (PutHistory, ListHistory, GetHistory), and reads
// schema 1's records, each in one key, as they are.
//
// The package never validates names or the model's rules (the coordinator does), keeps no state
// in memory beyond the open file, and starts no goroutines.
package store
