// Package coordinator is the daemon's authority on who consumes which queue. It keeps topics,
// consumer groups with their strategy bindings, the live members of each group, and for every
// (group, topic) a generation: a number and the assignment computed by the group's strategy
// plugin over the topic's read queues and the live members, in one call for the whole group.
//
// # Generations
//
// A generation changes only when one of its inputs does: the queues, the members (with their
// labels), the binding or the plugin's version. Every change marks the (group, topic) dirty and
// Tick recomputes it after a quiet window (Options.Debounce), at most Options.MaxDelay after the
// first change, so a burst of joins and leaves (a rolling restart) costs one plugin call, not one
// per member. Before calling the plugin, the inputs' fingerprint is compared with the one the
// current generation was computed from: a member that leaves and comes back with the same id
// costs nothing. A new number is published only when the assignment differs.
//
// If the plugin fails, the previous generation stays in force (as RocketMQ keeps a consumer's
// queues when its strategy throws); the failure is recorded in the status, counted and logged,
// and retried with backoff. Broadcasting groups and message-based delivery give every member
// every queue without calling a plugin.
//
// # Members and static membership
//
// Members are not persisted: they re-form from heartbeats, and one that misses the session
// timeout is dropped. The strategy knows a member by its key: its instance id when it has one
// (static membership), else its client id. A restarted static member (new client id, same
// instance id) therefore takes its predecessor's key and queues at once, with no plugin call and
// no new generation; the predecessor's client id is fenced for one session timeout so the two
// cannot take the place from each other.
//
// # Restarts
//
// The last generation of every (group, topic) is persisted with the fingerprint of its inputs,
// so numbers never go back and members keep their queues across a restart. For
// Options.RestartGrace after a restart, a generation whose members have not all come back is
// held: nothing is published until they have, or until the grace ends, so a restart does not
// reshuffle everyone.
//
// # Auto-scaling
//
// A topic with an autoscale policy has its queue counts driven by an autoscale.Topic, fed from
// Tick (membership), heartbeats (offsets, and the generations members applied, which confirm
// the layouts those generations cover) and the offsets API; its steps change the topic record
// and its State is saved with them, in one transaction. See autoscale.go.
//
// # Ordered consumption
//
// Groups bound with "orderly": true take locks (package lock): queue locks under queue delivery,
// message-group locks under message delivery. The lock table lives under the same mutex, reads
// the generations in force for queue owners, and loses a member's locks in the same critical
// section that removes the member. Every lock answer waits until the table's snapshot holding
// the state it saw is durable (group-committed), so a restart grants nothing that overlaps an
// earlier lease and tokens keep growing. See locks.go.
//
// # Handoff and history
//
// Under cooperative handoff (the default binding), a generation's Assignment, what members are
// told, is the strategy's answer (Target) less the queues another live member that confirms
// revocations may still hold; those wait in Handoffs and are published in a generation of their
// own when the previous owner confirms, leaves, expires, or is removed at its revoke timeout.
// Every published generation goes into the history with its trigger and its moves, in the
// store transaction that stores the generation. See handoff.go and history.go.
//
// # Time and concurrency
//
// Time comes from a Clock and work happens in Tick, which the daemon calls from Run and tests
// call directly after moving a fake clock: no test sleeps for a timer. One mutex guards all
// state. It is never held across a plugin call: Tick snapshots the due work under the mutex,
// calls the plugins without it, and installs the results under it again, so heartbeats are never
// stuck behind a slow plugin. A single mutex rather than a goroutine loop keeps every read
// (heartbeat answers, status) a plain function call, and the work under it is map lookups. Writes
// to the store (API changes, generation batches) happen under the mutex, so memory changes only
// after the store has accepted them; they are rare next to heartbeats, which write only when
// their offsets or confirmations change what an auto-scaled topic must save (a step, a plan).
//
// Long-polls wait on a per-group channel that is closed whenever one of the group's generations
// changes or the group is deleted, and on Done, closed when the coordinator closes.
//
// The coordinator never starts goroutines except in Run and Tick's plugin calls, never reads the
// real clock except through its Clock, and never lets a plugin failure change an assignment.
package coordinator
