// Package model holds the daemon's records as the API and the store carry them: topics and
// their brokers, groups and their bindings. It is shared by the daemon and the Go client, so
// the two cannot drift apart, and it depends on nothing heavier than the autoscale policy.
package model

import (
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/autoscale"
)

// Broker is one broker's share of a topic, as in RocketMQ's QueueData: queue ids
// 0..ReadQueues-1 are readable by consumers, 0..WriteQueues-1 writable by producers.
type Broker struct {
	Name        string `json:"name"`
	ReadQueues  int    `json:"readQueues"`
	WriteQueues int    `json:"writeQueues"`
}

// Topic is a named topic and its brokers.
type Topic struct {
	Name    string   `json:"name"`
	Brokers []Broker `json:"brokers"`
	// Autoscale is the topic's auto-scaling policy; nil when the operator keeps the counts.
	Autoscale *autoscale.Policy `json:"autoscale,omitempty"`
}

// Model is a group's message model.
type Model string

// The message models, as in RocketMQ.
const (
	// Clustering: each queue is consumed by one member, chosen by the group's strategy.
	Clustering Model = "clustering"
	// Broadcasting: every member consumes every queue.
	Broadcasting Model = "broadcasting"
)

// Delivery is how a group's members share messages.
type Delivery string

// The delivery modes.
const (
	// QueueDelivery: a member reads the queues it is assigned.
	QueueDelivery Delivery = "queue"
	// MessageDelivery: every member may read every queue; ordering comes from message-group
	// locks.
	MessageDelivery Delivery = "message"
)

// Binding is how a group's queues are shared: the strategy plugin and its configuration, the
// message model and the delivery mode.
type Binding struct {
	Strategy string            `json:"strategy"`
	Config   map[string]string `json:"config"`
	Model    Model             `json:"model"`
	Delivery Delivery          `json:"delivery"`
	// Orderly turns on ordered consumption: queue locks for queue delivery, message-group
	// locks for message delivery.
	Orderly bool `json:"orderly"`
	// Handoff is how a queue passes from one member to another: HandoffCooperative (the
	// default, "" reads as it) or HandoffEager. See model/history.go.
	Handoff HandoffMode `json:"handoff,omitempty"`
	// RevokeTimeout bounds a cooperative handoff's wait for the previous owner to confirm, as
	// a Go duration ("45s"); "" is the daemon's session timeout.
	RevokeTimeout string `json:"revokeTimeout,omitempty"`
}

// Group is a consumer group and its binding. Its JSON flattens the binding:
// {"name":"g","strategy":"averagely","config":{},"model":"clustering","delivery":"queue","orderly":false}.
type Group struct {
	Name string `json:"name"`
	Binding
}

// GroupStatus is a group as operators see it (GET /v1/groups/{group}): its binding, its live members, and per topic the
// generation in force with the whole assignment.
type GroupStatus struct {
	Group
	// State is the group's state (GroupState): the worst of its topics'.
	State   GroupState             `json:"state"`
	Members []MemberStatus         `json:"members"`
	Topics  map[string]TopicStatus `json:"topics"`
}

// MemberStatus is one live member.
type MemberStatus struct {
	CID           string            `json:"cid"`
	InstanceID    string            `json:"instanceId,omitempty"`
	Topics        []string          `json:"topics"`
	Labels        map[string]string `json:"labels"`
	LastHeartbeat time.Time         `json:"lastHeartbeat"`
	// Generations are what the member reported having applied.
	Generations map[string]int64 `json:"generations"`
	// Confirms: the member confirms revocations, so cooperative handoffs wait for it.
	Confirms bool `json:"confirms,omitempty"`
}

// TopicStatus is one (group, topic).
type TopicStatus struct {
	// Generation is the number in force, 0 before the first.
	Generation int64 `json:"generation"`
	// Assignment maps each member's client id to its queues.
	Assignment    map[string][]abi.Queue `json:"assignment"`
	Plugin        string                 `json:"plugin,omitempty"`
	PluginVersion string                 `json:"pluginVersion,omitempty"`
	PublishedAt   *time.Time             `json:"publishedAt,omitempty"`
	// Pending: an input changed and a new generation is being worked out.
	Pending bool `json:"pending"`
	// Held: after a restart, the generation waits for its members to come back.
	Held bool `json:"held,omitempty"`
	// Error is the last failure to compute a new generation, while it lasts.
	Error    string     `json:"error,omitempty"`
	ErrorAt  *time.Time `json:"errorAt,omitempty"`
	Failures int        `json:"failures,omitempty"`
	// Handoffs are the queues the strategy gave to a new owner that waits for the previous
	// one to confirm it let them go (cooperative handoff), by client id.
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// State is the topic's state (GroupState).
	State GroupState `json:"state"`
	// Offsets are the last offsets the owners of the queues reported in their heartbeats,
	// one per queue of the generation in force that has a report, sorted by queue.
	Offsets []QueueLag `json:"offsets,omitempty"`
	// Lag is the sum of the known lags of Offsets; nil when no queue's lag is known.
	Lag *int64 `json:"lag,omitempty"`
}

// GroupState is what a group (or one of its topics) is doing, worst first.
type GroupState string

// The group states, from the worst.
const (
	// StatePluginFailing: the last computation failed (the strategy errored, trapped or timed
	// out); the generation in force keeps serving.
	StatePluginFailing GroupState = "plugin-failing"
	// StateHeld: a change waits for the restart grace to end (members coming back).
	StateHeld GroupState = "held"
	// StateRebalancing: a change waits for its computation, or queues wait for their previous
	// owner to let them go (cooperative handoff).
	StateRebalancing GroupState = "rebalancing"
	// StateStable: the generation in force is up to date and every queue is with its owner.
	StateStable GroupState = "stable"
)

// Worse returns the worse of two states.
func (s GroupState) Worse(o GroupState) GroupState {
	rank := func(s GroupState) int {
		switch s {
		case StatePluginFailing:
			return 3
		case StateHeld:
			return 2
		case StateRebalancing:
			return 1
		}
		return 0
	}
	if rank(o) > rank(s) {
		return o
	}
	return s
}

// QueueLag is one queue's last reported offsets: Committed is the group's committed offset and
// Max the next offset to be written, -1 when unknown; Lag is Max - Committed (at least 0), nil
// when either is unknown. At is when the report arrived, Member the client id that sent it.
type QueueLag struct {
	Queue     abi.Queue `json:"queue"`
	Committed int64     `json:"committed"`
	Max       int64     `json:"max"`
	Lag       *int64    `json:"lag,omitempty"`
	Member    string    `json:"member"`
	At        time.Time `json:"at"`
}

// GroupSummary is a group in a list.
type GroupSummary struct {
	Group
	Members int `json:"members"`
	// State is the group's state, the worst of its topics'.
	State GroupState `json:"state"`
	// Topics are the group's topics with their generation in force and lag.
	Topics map[string]TopicSummary `json:"topics"`
	// Lag is the sum of the topics' known lags; nil when none is known.
	Lag *int64 `json:"lag,omitempty"`
}

// TopicSummary is one topic of a group in a list.
type TopicSummary struct {
	Generation int64      `json:"generation"`
	State      GroupState `json:"state"`
	Lag        *int64     `json:"lag,omitempty"`
}

// Preview is a dry run of another binding on the live members: per topic, the assignment it
// would give next to the one in force, and what would move.
type Preview struct {
	Binding Binding                 `json:"binding"`
	Topics  map[string]TopicPreview `json:"topics"`
}

// TopicPreview compares one topic's assignment in force with the proposed one, by client id.
type TopicPreview struct {
	Generation int64                  `json:"generation"`
	Current    map[string][]abi.Queue `json:"current"`
	Proposed   map[string][]abi.Queue `json:"proposed"`
	// Moves are the queues whose owner would change ("" for nobody), in queue order.
	Moves []Move `json:"moves"`
	// Counts are the queues each member holds now and would hold.
	Counts map[string]Count `json:"counts"`
	// Error is the plugin's failure; Proposed, Moves and Counts are then empty.
	Error string `json:"error,omitempty"`
}

// Move is one queue changing owner.
type Move struct {
	Queue abi.Queue `json:"queue"`
	From  string    `json:"from"`
	To    string    `json:"to"`
}

// Count is a member's queue count before and after.
type Count struct {
	Current  int `json:"current"`
	Proposed int `json:"proposed"`
}
