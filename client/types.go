package client

import (
	"encoding/json"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// Queue identifies one message queue, as RocketMQ's MessageQueue does; its String is
// MessageQueue's toString.
type Queue = abi.Queue

// The daemon's records, shared with it through package model: Topic carries its brokers and
// optional auto-scaling policy, Group its name and Binding (strategy plugin, config, message
// model, delivery mode, orderly).
type (
	Broker   = model.Broker
	Topic    = model.Topic
	Model    = model.Model
	Delivery = model.Delivery
	Binding  = model.Binding
	Group    = model.Group
)

// The message models and delivery modes.
const (
	Clustering      = model.Clustering
	Broadcasting    = model.Broadcasting
	QueueDelivery   = model.QueueDelivery
	MessageDelivery = model.MessageDelivery
)

// The daemon's views of a group (GET /v1/groups/{group}, the list of groups) and of a preview
// (POST /v1/groups/{group}/preview), shared with it through package model.
type (
	GroupStatus  = model.GroupStatus
	Member       = model.MemberStatus
	TopicStatus  = model.TopicStatus
	GroupSummary = model.GroupSummary
	Preview      = model.Preview
	TopicPreview = model.TopicPreview
	Move         = model.Move
	Count        = model.Count
)

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
	// Confirms says a generation is reported in Generations only once work on the queues it
	// took away has stopped: cooperative handoff then waits for the member's confirmation.
	Confirms bool `json:"confirms,omitempty"`
}

// MemberAssignment is a member's view of its group, the answer to a heartbeat or long-poll:
// per topic the generation in force and the member's queues in it.
type MemberAssignment struct {
	Generations map[string]int64   `json:"generations"`
	Queues      map[string][]Queue `json:"assignment"`
	// Lost: the daemon had ended the member's previous session (expired, or removed for not
	// confirming a revocation); what it was told before is no longer its own.
	Lost bool `json:"lost,omitempty"`
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
