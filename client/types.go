package client

import (
	"encoding/json"
	"time"

	"github.com/allocd/allocd/abi"
)

// Queue identifies one message queue, as RocketMQ's MessageQueue does; its String is
// MessageQueue's toString.
type Queue = abi.Queue

// Broker is one broker's share of a topic: queue ids 0..ReadQueues-1 are readable by
// consumers, 0..WriteQueues-1 writable by producers.
type Broker struct {
	Name        string `json:"name"`
	ReadQueues  int    `json:"readQueues"`
	WriteQueues int    `json:"writeQueues"`
}

// Topic is a named topic and its brokers (in name order, as the daemon keeps them).
type Topic struct {
	Name    string   `json:"name"`
	Brokers []Broker `json:"brokers"`
}

// Model is a group's message model.
type Model string

// The message models.
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

// Binding is how a group's queues are shared. Empty Model and Delivery mean clustering and
// queue delivery; Strategy names a loaded plugin ("averagely", "hash", ...).
type Binding struct {
	Strategy string            `json:"strategy"`
	Config   map[string]string `json:"config,omitempty"`
	Model    Model             `json:"model,omitempty"`
	Delivery Delivery          `json:"delivery,omitempty"`
	Orderly  bool              `json:"orderly,omitempty"`
}

// Group is a consumer group and its binding.
type Group struct {
	Name string `json:"name"`
	Binding
}

// GroupStatus is a group as the daemon shows it: its binding, its live members, and per topic
// the generation in force with the whole assignment.
type GroupStatus struct {
	Group
	Members []Member               `json:"members"`
	Topics  map[string]TopicStatus `json:"topics"`
}

// Member is one live member of a group.
type Member struct {
	CID           string            `json:"cid"`
	InstanceID    string            `json:"instanceId,omitempty"`
	Topics        []string          `json:"topics"`
	Labels        map[string]string `json:"labels"`
	LastHeartbeat time.Time         `json:"lastHeartbeat"`
	// Generations are what the member reported having applied, per topic.
	Generations map[string]int64 `json:"generations"`
}

// TopicStatus is one (group, topic).
type TopicStatus struct {
	// Generation is the number in force, 0 before the first.
	Generation int64 `json:"generation"`
	// Assignment maps each member's client id to its queues.
	Assignment    map[string][]Queue `json:"assignment"`
	Plugin        string             `json:"plugin,omitempty"`
	PluginVersion string             `json:"pluginVersion,omitempty"`
	PublishedAt   *time.Time         `json:"publishedAt,omitempty"`
	// Pending: an input changed and a new generation is being worked out.
	Pending bool `json:"pending"`
	// Held: after a daemon restart, the generation waits for its members to come back.
	Held bool `json:"held,omitempty"`
	// Error is the last failure to compute a new generation, while it lasts; the previous
	// generation stays in force meanwhile.
	Error    string     `json:"error,omitempty"`
	ErrorAt  *time.Time `json:"errorAt,omitempty"`
	Failures int        `json:"failures,omitempty"`
}

// GroupSummary is a group in the list of groups.
type GroupSummary struct {
	Group
	Members int `json:"members"`
}

// Preview is a dry run of another binding on a group's live members.
type Preview struct {
	Binding Binding                 `json:"binding"`
	Topics  map[string]TopicPreview `json:"topics"`
}

// TopicPreview compares one topic's assignment in force with the proposed one, by client id.
type TopicPreview struct {
	Generation int64              `json:"generation"`
	Current    map[string][]Queue `json:"current"`
	Proposed   map[string][]Queue `json:"proposed"`
	// Moves are the queues whose owner would change ("" for nobody), in queue order.
	Moves []Move `json:"moves"`
	// Counts are the queues each member holds now and would hold.
	Counts map[string]Count `json:"counts"`
	// Error is the plugin's failure; Proposed, Moves and Counts are then empty.
	Error string `json:"error,omitempty"`
}

// Move is one queue changing owner.
type Move struct {
	Queue Queue  `json:"queue"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// Count is a member's queue count now and under the proposed binding.
type Count struct {
	Current  int `json:"current"`
	Proposed int `json:"proposed"`
}

// Route is what producers of a topic may send to: its writable queues in the daemon's
// canonical order; with a key, also the queue the key maps to.
type Route struct {
	Topic  string  `json:"topic"`
	Queues []Queue `json:"queues"`
	Key    *string `json:"key,omitempty"`
	Queue  *Queue  `json:"queue,omitempty"`
}

// Heartbeat is what a member reports about itself.
type Heartbeat struct {
	CID        string            `json:"cid"`
	Topics     []string          `json:"topics"`
	InstanceID string            `json:"instanceId,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// Generations are the generations the member has applied, per topic.
	Generations map[string]int64 `json:"generations,omitempty"`
}

// MemberAssignment is a member's view of its group, the answer to a heartbeat or long-poll:
// per topic the generation in force and the member's queues in it.
type MemberAssignment struct {
	Generations map[string]int64   `json:"generations"`
	Queues      map[string][]Queue `json:"assignment"`
}

// PluginStatus is one strategy plugin as the daemon's registry reports it.
type PluginStatus struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	FileGone bool   `json:"fileGone,omitempty"`
	// ActiveHash is the content hash of the version serving, "" when none serves.
	ActiveHash      string          `json:"activeHash,omitempty"`
	Version         string          `json:"version,omitempty"`
	Info            json.RawMessage `json:"info,omitempty"`
	LoadedAt        time.Time       `json:"loadedAt"`
	LastAttempt     time.Time       `json:"lastAttempt"`
	LastAttemptHash string          `json:"lastAttemptHash,omitempty"`
	LastError       string          `json:"lastError,omitempty"`
	Reloads         int             `json:"reloads"`
	Failures        int             `json:"failures"`
	Stats           json.RawMessage `json:"stats,omitempty"`
}
