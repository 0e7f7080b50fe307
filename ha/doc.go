// Package ha runs one allocd replica of several on an etcd cluster: it campaigns for leadership
// (client/v3/concurrency: a session lease, an election), runs the daemon's coordinator only
// while it leads, and fronts the HTTP API so that any replica answers every call.
//
// The invariant it keeps: a replica answers from its memory (assignments, long-polls, lock
// grants and checks) only while its own Deadline, measured from the send time of its last
// answered keep-alive, has not passed; and that deadline falls before etcd can let its lease go
// and elect the next leader. Its writes are fenced apart from that by the store (every write is
// a transaction that succeeds only while the election key still has the creation revision the
// term won with); a write the fence refuses ends the term at once (Elector.Fenced).
//
// It must never serve an answer of a term after the term ended, and never run two terms at once.
package ha
