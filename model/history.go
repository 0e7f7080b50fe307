package model

import (
	"time"

	"github.com/allocd/allocd/abi"
)

// HandoffMode is how a group's queues pass from one member to another.
type HandoffMode string

// The handoff modes.
const (
	// HandoffCooperative gives a queue to its new owner only once the previous owner has
	// confirmed a generation without it, has gone, or has been removed for not confirming
	// within the revoke timeout: no two live members are ever told the same queue. The default.
	HandoffCooperative HandoffMode = "cooperative"
	// HandoffEager tells every member its whole new assignment at once: the new owner may start
	// on a queue before the previous one has stopped (RocketMQ's behaviour).
	HandoffEager HandoffMode = "eager"
)

// Handoff is a queue the strategy gave to a new owner, held back until its previous owner lets
// it go. In the API, From and To are client ids.
type Handoff struct {
	Queue abi.Queue `json:"queue"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	// Since is when the handoff began; Deadline is when the previous owner, if it has still
	// not confirmed, is removed from the group so the queue can move.
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline"`
}

// HistoryEntry is one published generation of a (group, topic): when, why, computed by what,
// and which queues changed owner.
type HistoryEntry struct {
	Group      string    `json:"group"`
	Topic      string    `json:"topic"`
	Generation int64     `json:"generation"`
	At         time.Time `json:"at"`
	Trigger    Trigger   `json:"trigger"`
	// Plugin and PluginVersion computed the assignment ("" when no plugin was called).
	Plugin        string      `json:"plugin,omitempty"`
	PluginVersion string      `json:"pluginVersion,omitempty"`
	Handoff       HandoffMode `json:"handoff"`
	// Members is the number of members the generation assigns; Queues the number of queues it
	// gives out.
	Members int `json:"members"`
	Queues  int `json:"queues"`
	// Moves are the queues whose owner changed, by client id, in queue order; "" is nobody.
	Moves []Move `json:"moves"`
	// Pending are the handoffs the generation still holds back (cooperative mode).
	Pending []Handoff `json:"pending,omitempty"`
}

// The causes a Trigger lists, in this order.
const (
	CauseFirst         = "first"         // the first generation of the (group, topic)
	CauseJoined        = "joined"        // members joined (Trigger.Joined)
	CauseLeft          = "left"          // members left (Trigger.Left)
	CauseExpired       = "expired"       // members missed the session timeout (Trigger.Expired)
	CauseRevokeTimeout = "revokeTimeout" // members removed for not confirming a revocation (Trigger.Removed)
	CauseLabels        = "labels"        // members' labels changed (Trigger.Labels)
	CauseBinding       = "binding"       // the group's binding changed (Trigger.Binding)
	CausePlugin        = "plugin"        // the plugin's version changed (Trigger.Plugin)
	CauseQueues        = "queues"        // the topic's read queue count changed (Trigger.Queues)
	CauseHandoff       = "handoff"       // held-back queues were released (Trigger.Released)
	CauseRestart       = "restart"       // recomputed after a daemon restart, inputs not comparable
)

// Trigger says what made a generation: the causes, and the details of each, by client id.
type Trigger struct {
	Causes  []string       `json:"causes"`
	Joined  []string       `json:"joined,omitempty"`
	Left    []string       `json:"left,omitempty"`
	Expired []string       `json:"expired,omitempty"`
	Removed []string       `json:"removed,omitempty"`
	Labels  []string       `json:"labels,omitempty"`
	Binding *BindingChange `json:"binding,omitempty"`
	Plugin  *VersionChange `json:"plugin,omitempty"`
	Queues  *CountChange   `json:"queues,omitempty"`
	// Released are the previous owners whose held-back queues the generation hands over, and why.
	Released []Release `json:"released,omitempty"`
}

// BindingChange is a changed binding: its strategy before and after (the same when only the
// config, model, delivery, orderly flag or handoff mode changed).
type BindingChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// VersionChange is a plugin answering in a new version.
type VersionChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// CountChange is a queue count before and after.
type CountChange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// The reasons of a Release.
const (
	ReleaseConfirmed     = "confirmed"     // the previous owner's heartbeat confirmed a generation without the queues
	ReleaseLeft          = "left"          // the previous owner left the group
	ReleaseExpired       = "expired"       // the previous owner's session expired
	ReleaseRevokeTimeout = "revokeTimeout" // the previous owner was removed for not confirming in time
)

// Release is a previous owner letting held-back queues go.
type Release struct {
	Member string      `json:"member"`
	Reason string      `json:"reason"`
	Queues []abi.Queue `json:"queues"`
}

// History is a page of a (group, topic)'s history, newest first (GET /v1/groups/{group}/history).
type History struct {
	Group   string         `json:"group"`
	Topic   string         `json:"topic"`
	Entries []HistoryEntry `json:"entries"`
	// Next is the before= value of the following (older) page, 0 when there is none.
	Next int64 `json:"next,omitempty"`
}

// Explanation tells one queue's story over the retained history
// (GET /v1/groups/{group}/explain), oldest first.
type Explanation struct {
	Group string    `json:"group"`
	Topic string    `json:"topic"`
	Queue abi.Queue `json:"queue"`
	// Owner is the client id holding the queue in Generation, the newest retained ("" for nobody).
	Owner      string `json:"owner"`
	Generation int64  `json:"generation"`
	// Oldest is the oldest generation retained: what happened before it is forgotten.
	Oldest  int64         `json:"oldest"`
	Changes []OwnerChange `json:"changes"`
}

// OwnerChange is a generation in which the queue changed owner, with what triggered it and a
// sentence that says so.
type OwnerChange struct {
	Generation    int64     `json:"generation"`
	At            time.Time `json:"at"`
	From          string    `json:"from"`
	To            string    `json:"to"`
	Trigger       Trigger   `json:"trigger"`
	Plugin        string    `json:"plugin,omitempty"`
	PluginVersion string    `json:"pluginVersion,omitempty"`
	// PendingTo is the member the queue is held back for, when it was withdrawn for a handoff.
	PendingTo string `json:"pendingTo,omitempty"`
	Summary   string `json:"summary"`
}
