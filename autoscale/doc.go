// Package autoscale decides, for one topic at a time, how many queues each broker of the topic
// should have, so that the number of queues follows the number of consumers: DeFiBus's
// expansion and shrinking rules (../shared/specs/autoscale-and-ordering.md, part A), done once
// per topic and without DeFiBus's faults.
//
// # What it is
//
// A Topic is a pure state machine. Its inputs are facts with the time they were learned:
// membership snapshots (SetGroup, RemoveGroup), members' confirmations (Confirm), offset
// reports (ReportOffsets), operator changes (SetBroker, RemoveBroker, SetPolicy) and clock
// ticks (Tick). Each input returns an Output: the Steps to apply ("set read of broker-a 4 -> 5")
// and the Events to log, in order. Status says what it waits for and why; NextDeadline says
// when to tick it next; State and Restore carry it across a restart.
//
// The rules, with the policy's defaults:
//
//   - Target: the live members of the largest clustering group, clamped to [Min, Max]
//     (1, 1024). Broadcasting groups never count. Every broker gets the target.
//   - Growth: read rises at once. Write follows ExpandWriteDelay (10 s) later, and only once
//     every live member of every clustering group has confirmed the new layout, or
//     MaxConfirmWait (60 s) after the read raise, with an EventUnconfirmed.
//   - Shrink: once the target has stayed below the write count for ShrinkStableFor (60 s),
//     write drops to the highest target seen in that time. ShrinkReadDelay (5 min) later, read
//     drops to write if every queue to remove is drained; if not, it is checked again every
//     ShrinkReadDelay, forever, with the blockers in Status and an EventNotDrained each time.
//   - Every step recomputes the target when it runs. One step is pending at a time, under a
//     generation number; a change that calls for another step supersedes it. Write never
//     exceeds read.
//
// # What it must never do
//
// It does no I/O, starts no goroutines, reads no clock (time is an argument of every input),
// draws no random numbers and keeps no global state. The same State and the same inputs give
// the same outputs, byte for byte: maps are never iterated into an output unsorted. That is
// what lets the transcripts in testdata/ pin every rule down without a sleep, and lets a
// daemon replay a topic exactly. It is not safe for concurrent use; the daemon serialises each
// topic's inputs.
//
// # Driving it
//
// The daemon, per topic:
//
//	t, err := autoscale.New(name, policy, brokers) // or autoscale.Restore(saved)
//	out := t.Tick(now)                             // and after every input:
//	apply(out.Steps)                               // change the counts, new generations
//	if out.Persist { save(t.State()) }             // in the same transaction as apply
//	log(out.Events)
//	if due, ok := t.NextDeadline(); ok { timer.Reset(due.Sub(now)) }
//
// Steps are facts, not requests: the Topic counts them as done when it returns them, so the
// daemon applies them and saves State together. That keeps one source of truth for the
// counts; if the daemon cannot apply a step, it says what the counts really are through
// SetBroker, as an operator would.
//
// Why outputs are returned from each input rather than collected by a Ready call, as etcd's
// raft does: raft batches because it feeds a pipeline of network and disk writes that run
// concurrently with new input, and acknowledges them later (Advance). Here every input is
// handled to completion under the topic's lock, and its steps must be applied before the next
// input is judged against the new counts. Returning the Output ties each step and event to
// the input that caused it (which makes transcripts and log lines exact), cannot be forgotten
// half-drained, and needs no acknowledgement protocol.
//
// # Confirmations: the layout
//
// "Every member has attached to the new queues" is stated with a number, the layout: a
// version of the readable queue set that rises whenever a read count changes or a broker comes
// or goes (Topic.Layout). The daemon notes the layout each group generation was computed over;
// when a member reports, by heartbeat, that it applied a generation, the daemon calls Confirm
// with that generation's layout. A read count alone would not do: after a shrink and a regrow,
// or when a broker joins, a member on an old generation can report the same count.
//
// # Persistence
//
// Output.Persist says when State must be saved: whenever the counts, the pending step or its
// clocks, the set of groups, or the set of (group, queue) offsets changed. Members,
// confirmations and advancing committed offsets are refreshed by heartbeats, and a stale copy
// of them is safe (an older confirmation or committed offset can only make a step wait
// longer), so the daemon may save those at its own pace. Max offsets are never saved: an old
// one could be lower than the truth and make a queue look drained, so after Restore a queue
// is not drained until a report after the restart says so. After Restore, the daemon calls
// Tick (a step that fell due while it was down runs then) and sends every group's membership
// again as heartbeats arrive.
//
// # DeFiBus faults (spec A.11) and what became of them
//
//  1. Per-broker decisions: one Topic decides for all brokers of the topic.
//  2. Fixed 10 s gap before writes: the write step also waits for confirmations, bounded and
//     reported. (Starting new queues from offset 0 rather than the max is the consumers' part.)
//  3. Stale groups block shrinking: a group that is not live counts for a queue only while its
//     committed offset there advanced within OffsetRetention (72 h). An unknown offset of a
//     group that counts still blocks, as the issue requires.
//  4. Broadcasting groups block shrinking: their committed offsets are ignored.
//  5. Silent give-up: a blocked read drop is checked forever, visibly; there is no "abort
//     without retry" path, because every input reconciles the counts with the target.
//  6. Dedup keys and task pile-up: there is no scheduler, only one pending step per topic.
//  7. A lock that does not lock: the daemon serialises inputs; operator changes are inputs.
//  8. Nothing persisted: State and Restore, resumption tested mid-step.
//  9. Thrash and missed decreases: membership is a snapshot, every input reconciles, and
//     ShrinkStableFor with the peak target is the hysteresis.
//  10. Drain judged by committed offsets only: unchanged in kind, with two refinements: with
//     no store time reported, the time the current max offset was first seen bounds the last
//     write, and max offsets do not survive a restart. A write fence per queue needs the
//     brokers' help and is not attempted here.
//  11. IDC parsing of client ids: none; zone-aware sizing, if wanted, belongs in the
//     membership the daemon passes.
package autoscale
