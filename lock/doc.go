// Package lock is the lock core of allocd's ordered consumption: who may
// consume a queue, or a message group, right now, and for how long.
//
// Ordered messages must be processed one at a time, in order, by one
// consumer, even while the group rebalances. RocketMQ does this with advisory
// broker-side queue locks (no fencing; a crashed consumer keeps its queues
// for 60 s) and, for FIFO pop consumption, with per-queue blocking (every
// message group on a queue waits behind the slowest one). This package keeps
// the leases and fixes those faults: every grant carries a fencing token, a
// departed member's locks are released at once, and message groups are
// locked one by one.
//
// # A pure core
//
// Like etcd's raft package, the Table only implements the rules. It never
// reads the clock (every call takes now), sleeps, starts goroutines, does
// I/O or draws random numbers, so the same state and the same calls give the
// same results; the transcripts in testdata are replayed exactly. The daemon
// does everything else: it serialises calls (a Table is not safe for
// concurrent use), answers HTTP, persists snapshots, runs Tick every few
// seconds, and tells the Table what it needs to know through two small
// interfaces:
//
//   - Directory: a group's GroupConfig (kind, maxAttempts), its live
//     members, and the owner of each queue in the current generation. The
//     Table asks for the owner at each lock call rather than being sent
//     assignments, so it can never act on a generation the daemon has already
//     replaced, and there is one copy of the assignment, not two.
//   - Preference: which live member the group's plugin prefers for a message
//     group; consulted only when members contend for a free group.
//
// Both must answer from memory and deterministically, and never call back
// into the Table.
//
// # Queue locks (queue-based orderly groups)
//
// A lock per (group, queue). LockQueues grants a queue only to the member the
// current generation assigns it to, and only while no other member's lease on
// it is live; the same call renews the caller's own locks (same token, the
// lease restarts at now). When a rebalance moves a queue, the new owner is
// refused (ReasonHeld) until the old holder unlocks, its lease ends, or it
// leaves the group; the old holder's renewals are refused (ReasonNotOwner),
// so the handover waits at most one lease. Ownership never overlaps.
//
// # Message-group locks (message-based orderly groups)
//
// A lock per (group, topic, message group), so message groups that share a
// queue never block each other. Any live member may take a free message
// group. Contention never blocks: a member refused a held group is told when
// to ask again, and its ask is remembered for Config.Patience. When the group
// frees, it is kept (ReasonReserved) for the member the plugin prefers, if
// that member is live and its ask is still fresh; anyone else gets it
// otherwise. A reservation lives only as long as the preferred member keeps
// asking, so a free group is never withheld longer than Patience from a
// member asking for it: no group starves, and ownership drifts to the
// preferred member at the next release instead of being taken from a holder.
//
// The holder keeps the group until it releases it with Done or Retry, its
// lease (the invisible time) ends, or it leaves. Each group counts failed
// attempts at its head message: Retry, a lease that runs out, and a holder
// that leaves each count one; Done resets the count. Grants report the
// attempt, and DeadLetter once the head message has failed MaxAttempts times
// (default 17: RocketMQ's 16 retries plus the first delivery).
//
// # Leases and fencing tokens
//
// A lease is valid while now < Expires; it runs 10 s to 12 h, 60 s by
// default, for both kinds of lock. Every grant takes a new token from one
// counter for the whole Table, so tokens grow strictly per lock; renewals
// keep the token. Check tells a broker or an offset store whether a token
// still holds its lock, so a stale holder's commit can be refused; a stale
// holder's release is refused too, and its renewal is either refused (the
// lock moved on) or becomes a new grant with a new token (Grant.Renewed is
// false), never a revival of its old one.
//
// # Restarts: persist, do not wait
//
// After a restart the daemon must not grant a lock that could overlap a
// lease granted before it. It could wait out the longest lease instead of
// remembering them, but leases may be 12 h long: every restart would stop all
// ordered consumption for up to 12 h (or for the longest lease granted,
// which must be persisted anyway), and the token counter must survive the
// restart regardless, or new grants would reuse old tokens and fencing would
// fail. So the Table's state is a plain, JSON-tagged Snapshot, and the rule
// for the daemon is:
//
//	make Snapshot() durable before answering any call after which
//	Version() has changed
//
// and restore it with Restore before serving. Refusals and Check do not
// change Version, so they need no write; the daemon can batch the writes of
// concurrent calls (group commit). Renewals do change Version: a renewal
// that was answered but not persisted would let the restarted daemon grant
// the lock while its holder still relies on the longer lease.
//
// The Table's clock never runs backwards, and a restored Table's clock never
// runs behind the snapshot's, so a host whose clock is behind lengthens
// leases rather than cutting them short. (The one visible effect: a lease that
// ran out unreplaced just before a restart onto a slower clock may read as
// live again until it runs out on the new clock. No one else can hold that
// lock meanwhile, since granting it would have been persisted.) Remembered
// asks are not persisted: losing them costs at most one grant to a member
// the plugin does not prefer.
//
// # What the Table must never do
//
//   - grant a lock while another member's lease on it may be live;
//   - issue a token twice, or lower the counter, even across Restore;
//   - change a token on renewal, or renew a lease that has run out;
//   - accept a release, or pass a Check, with a token that is not the live
//     grant's;
//   - block, sleep, read the clock, start goroutines, do I/O or use
//     randomness;
//   - take a lock from a live holder because a plugin prefers someone else.
package lock
