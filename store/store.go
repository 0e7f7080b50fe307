package store

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// Store is the daemon's durable state. Its methods are safe for concurrent use. Every method
// that writes is one transaction, durable when it returns; when it fails, nothing was written.
type Store interface {
	// PutTopic creates or replaces the topic named t.Name.
	PutTopic(t Topic) error
	// GetTopic returns the topic, or an error matching ErrNotFound.
	GetTopic(name string) (Topic, error)
	// DeleteTopic removes the topic, or returns an error matching ErrNotFound. The generations
	// of groups that consumed it stay, so their numbers keep growing if it comes back.
	DeleteTopic(name string) error
	// ListTopics returns every topic, sorted by name.
	ListTopics() ([]Topic, error)

	// PutGroup creates or replaces the group named g.Name and its binding.
	PutGroup(g Group) error
	// GetGroup returns the group, or an error matching ErrNotFound.
	GetGroup(name string) (Group, error)
	// DeleteGroup removes the group and every generation of it, or returns an error matching
	// ErrNotFound.
	DeleteGroup(name string) error
	// ListGroups returns every group, sorted by name.
	ListGroups() ([]Group, error)

	// PutGenerations writes generations, replacing the earlier record of each (group, topic),
	// all in one transaction.
	PutGenerations(gens ...Generation) error
	// ListGenerations returns every generation, sorted by group, then topic.
	ListGenerations() ([]Generation, error)

	// Update runs fn in a read-write transaction over the generic buckets, committed (and on
	// disk) if fn returns nil, rolled back otherwise.
	Update(fn func(Tx) error) error
	// View runs fn in a read-only transaction over the generic buckets.
	View(fn func(Tx) error) error

	// Close releases the store. Calls after Close fail.
	Close() error
}

// Tx reads and writes the generic buckets, named key-value spaces created on first write. A
// Tx is valid only inside the function it was passed to. Bucket names that the typed records
// use ("topics", "groups", "generations", "meta") are refused.
type Tx interface {
	// Get returns a copy of the value under key, and whether there was one.
	Get(bucket, key string) ([]byte, bool, error)
	// Put stores value under key.
	Put(bucket, key string, value []byte) error
	// Delete removes key; deleting an absent key is not an error.
	Delete(bucket, key string) error
	// List calls fn for every key that starts with prefix, in byte-wise key order, until fn
	// returns an error, which List returns. value is valid only during the call.
	List(bucket, prefix string, fn func(key string, value []byte) error) error
	// NextSequence returns the bucket's next sequence number, starting at 1. Numbers are
	// persisted with the transaction and never handed out twice, so they serve as fencing
	// tokens.
	NextSequence(bucket string) (uint64, error)
}

// The records the store keeps are package model's, shared with the API and the Go client.
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

// Generation is the last published assignment of one (group, topic).
type Generation struct {
	Group  string `json:"group"`
	Topic  string `json:"topic"`
	Number int64  `json:"number"`
	// Assignment maps a member key (a static member's instance id, or else its client id: the
	// consumer id the strategy saw) to its queues, in the strategy's order.
	Assignment map[string][]abi.Queue `json:"assignment"`
	// CIDs maps each member key of Assignment to the client id that holds it.
	CIDs map[string]string `json:"cids,omitempty"`
	// Inputs fingerprints everything the assignment was computed from (queues, members and
	// their labels, binding, plugin version), so an unchanged group is not recomputed.
	Inputs string `json:"inputs"`
	// Plugin and PluginVersion name the strategy that computed it ("" when no plugin was called).
	Plugin        string    `json:"plugin,omitempty"`
	PluginVersion string    `json:"pluginVersion,omitempty"`
	At            time.Time `json:"at"`
	// Target is the strategy's assignment when it differs from Assignment, the one members are
	// told: under cooperative handoff, Handoffs lists the queues held back until their previous
	// owner lets them go (member keys in From and To).
	Target   map[string][]abi.Queue `json:"target,omitempty"`
	Handoffs Handoffs               `json:"handoffs,omitempty"`

	packTable *QueueTable // see PackOver
	keys      []string    // see KeysInOrder
}

// ErrNotFound is matched (errors.Is) by the error of a lookup or delete of an absent record.
var ErrNotFound = errors.New("not found")

// ErrReserved is matched by the error of a generic-bucket call on a bucket the typed records use.
var ErrReserved = errors.New("reserved bucket")

// Error is a failed store operation, naming what was done to which record.
type Error struct {
	Op  string // "put topic \"T\"", "open /var/lib/allocd", ...
	Err error
}

func (e *Error) Error() string { return "store: " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func opErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{Op: fmt.Sprintf(format, args...), Err: err}
}

// Bucket names of the typed records.
const (
	bucketTopics      = "topics"
	bucketGroups      = "groups"
	bucketGenerations = "generations"
	bucketMeta        = "meta"
)

func reserved(bucket string) bool {
	switch bucket {
	case bucketTopics, bucketGroups, bucketGenerations, bucketMeta:
		return true
	}
	return false
}

// checkName refuses names the key layout cannot hold: the generation key joins group and topic
// with a NUL byte.
func checkName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("empty %s name", kind)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%s name %q contains a NUL byte", kind, name)
	}
	return nil
}

func generationKey(group, topic string) string { return group + "\x00" + topic }
