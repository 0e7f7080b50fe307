// Package store keeps the daemon's durable state: topics, groups with their strategy bindings,
// the last generation of every (group, topic), and generic buckets that other parts of the daemon
// (autoscale's pending steps, lock leases and fencing tokens) use for their own records.
//
// Store is one interface so that the embedded file store (Bolt, a bbolt file in the data folder)
// can later be joined by a shared one (etcd) for several daemons. Every write is one transaction
// that is on disk (fsync) when it returns, so a record survives kill -9; a write that fails (a
// full disk, a read-only file) changes nothing and returns an error that unwraps to its cause
// (errors.Is(err, syscall.ENOSPC)).
//
// Records are JSON, so a field added later reads as its zero value from an older file.
//
// The package never validates names or the model's rules (the coordinator does), keeps no state
// in memory beyond the open file, and starts no goroutines.
package store
