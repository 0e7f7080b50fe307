package autoscale

import (
	"fmt"
	"strings"
	"time"
)

// Model is a consumer group's message model, as RocketMQ names it.
type Model uint8

const (
	// Clustering groups share the queues among their members. They size the topic. It is the
	// zero value because it is RocketMQ's default.
	Clustering Model = iota
	// Broadcasting groups give every member every queue. They never size the topic, never
	// gate a write step and never block a read drop (their offsets live on the members).
	Broadcasting
)

func (m Model) String() string {
	switch m {
	case Clustering:
		return "clustering"
	case Broadcasting:
		return "broadcasting"
	}
	return fmt.Sprintf("Model(%d)", uint8(m))
}

// MarshalText writes "clustering" or "broadcasting".
func (m Model) MarshalText() ([]byte, error) {
	if m > Broadcasting {
		return nil, fmt.Errorf("autoscale: unknown message model %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText accepts "clustering" or "broadcasting" in any case (RocketMQ writes
// CLUSTERING).
func (m *Model) UnmarshalText(text []byte) error {
	switch strings.ToLower(string(text)) {
	case "clustering":
		*m = Clustering
	case "broadcasting":
		*m = Broadcasting
	default:
		return fmt.Errorf("autoscale: message model %q: want clustering or broadcasting", text)
	}
	return nil
}

// Broker is one broker of the topic and its queue counts, as in RocketMQ's TopicConfig:
// consumers are assigned queues 0..Read-1, producers write to queues 0..Write-1. Write never
// exceeds Read.
type Broker struct {
	Name  string `json:"name"`
	Read  int    `json:"read"`
	Write int    `json:"write"`
}

func (b Broker) validate() error {
	if b.Name == "" {
		return fmt.Errorf("autoscale: broker with no name")
	}
	if b.Read < 0 || b.Read > MaxQueues {
		return fmt.Errorf("autoscale: broker %s: read count %d out of range [0,%d]", b.Name, b.Read, MaxQueues)
	}
	if b.Write < 0 || b.Write > b.Read {
		return fmt.Errorf("autoscale: broker %s: write count %d out of range [0,%d]: write never exceeds read",
			b.Name, b.Write, b.Read)
	}
	return nil
}

// Group is a snapshot of one consumer group subscribed to the topic: its model and the ids of
// its live members (those the daemon holds a live session for).
type Group struct {
	Name    string
	Model   Model
	Members []string
}

// Offset is one queue's offsets as some party saw them. In a group's report Committed is the
// group's committed offset; in a broker's report (empty group) it is ignored. A negative
// Committed or Max means unknown, as RocketMQ reports a missing offset as -1. Max is the next
// offset to be written, so a queue is consumed up to date when Committed >= Max. LastWrite is
// the store time of the queue's last message; zero means not reported.
type Offset struct {
	Broker    string
	Queue     int
	Committed int64
	Max       int64
	LastWrite time.Time
}

// StepKind says which count a Step sets.
type StepKind uint8

const (
	SetRead StepKind = iota + 1
	SetWrite
)

func (k StepKind) String() string {
	switch k {
	case SetRead:
		return "set-read"
	case SetWrite:
		return "set-write"
	}
	return fmt.Sprintf("StepKind(%d)", uint8(k))
}

// MarshalText writes "set-read" or "set-write".
func (k StepKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Step is one change of one broker's count. The Topic has already counted it as done when it
// returns it: the daemon applies it and persists State in the same transaction.
type Step struct {
	Kind   StepKind `json:"kind"`
	Broker string   `json:"broker"`
	From   int      `json:"from"`
	To     int      `json:"to"`
	// Generation is the plan generation that took the step (see Status.Generation). It is the
	// topic's own counter, unrelated to a consumer group's assignment generation.
	Generation uint64 `json:"generation"`
	// Reason says why, in one sentence, for the log line.
	Reason string `json:"reason"`
}

func (s Step) String() string {
	what := "read"
	if s.Kind == SetWrite {
		what = "write"
	}
	return fmt.Sprintf("set %s of %s %d -> %d (gen %d): %s", what, s.Broker, s.From, s.To, s.Generation, s.Reason)
}

// EventKind classifies an Event, for metrics and log levels.
type EventKind uint8

const (
	// EventTarget: the target count changed.
	EventTarget EventKind = iota + 1
	// EventStep: a step was taken; one per Step, in order with the other events.
	EventStep
	// EventPlanned: a step is pending and when it will run.
	EventPlanned
	// EventSuperseded: a pending step was replaced by a newer plan.
	EventSuperseded
	// EventCancelled: a pending step is no longer needed.
	EventCancelled
	// EventUnconfirmed: an expansion's write step ran without every confirmation, after
	// MaxConfirmWait. Worth a warning: a late member may start a new queue at its max offset.
	EventUnconfirmed
	// EventNotDrained: a drain check failed; the read drop is checked again later. Worth a
	// warning when repeated: it never gives up, so someone should look.
	EventNotDrained
)

var eventKindNames = [...]string{
	EventTarget:      "target",
	EventStep:        "step",
	EventPlanned:     "planned",
	EventSuperseded:  "superseded",
	EventCancelled:   "cancelled",
	EventUnconfirmed: "unconfirmed",
	EventNotDrained:  "not-drained",
}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// MarshalText writes the kind's name, e.g. "not-drained".
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Event is something worth a log line.
type Event struct {
	Time       time.Time `json:"time"`
	Kind       EventKind `json:"kind"`
	Generation uint64    `json:"generation"`
	Message    string    `json:"message"`
}

// Output is what one input produced: the steps to apply, in order, and the events to log, in
// order (including one EventStep per step).
type Output struct {
	Steps  []Step
	Events []Event
	// Persist is true when the input changed state that must survive a restart: the counts,
	// the pending step and its clocks, the set of groups, or the first offset a group
	// committed on a queue. The daemon then saves State (with the Steps applied) before it
	// acts on anything else. Other changes (members, confirmations, offsets that advance) are
	// refreshed by heartbeats and are safe to lose, so saving them can wait.
	Persist bool
}

// Phase names the step a topic is waiting to take.
type Phase uint8

const (
	// Idle: nothing pending; the counts match the target.
	Idle Phase = iota
	// RaiseWrite: the read count has risen; the write count follows after ExpandWriteDelay,
	// once the members confirmed the new queues (or MaxConfirmWait passed).
	RaiseWrite
	// LowerWrite: the target is below the write count; the write count drops once the target
	// has stayed below it for ShrinkStableFor.
	LowerWrite
	// LowerRead: the write count has dropped; the read count follows after ShrinkReadDelay,
	// once every queue to remove is drained, checked again every ShrinkReadDelay until it is.
	LowerRead
)

var phaseNames = [...]string{Idle: "idle", RaiseWrite: "raise-write", LowerWrite: "lower-write", LowerRead: "lower-read"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// MarshalText writes the phase's name, e.g. "lower-read".
func (p Phase) MarshalText() ([]byte, error) {
	if int(p) >= len(phaseNames) {
		return nil, fmt.Errorf("autoscale: unknown phase %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText accepts the names MarshalText writes.
func (p *Phase) UnmarshalText(text []byte) error {
	for i, name := range phaseNames {
		if string(text) == name {
			*p = Phase(i)
			return nil
		}
	}
	return fmt.Errorf("autoscale: unknown phase %q", text)
}

// stepKind is the kind of step a phase ends with.
func (p Phase) stepKind() StepKind {
	if p == LowerRead {
		return SetRead
	}
	return SetWrite
}
