package coordinator

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// The records are package model's, one definition for the store, the API and the Go client.
type (
	Topic    = model.Topic
	Broker   = model.Broker
	Group    = model.Group
	Binding  = model.Binding
	Model    = model.Model
	Delivery = model.Delivery
)

// The message models and delivery modes.
const (
	Clustering      = model.Clustering
	Broadcasting    = model.Broadcasting
	QueueDelivery   = model.QueueDelivery
	MessageDelivery = model.MessageDelivery
)

// Limits on what a request may declare. They bound the memory and the plugin input one client
// can cause; RocketMQ's own defaults sit well inside them.
const (
	MaxNameLen         = 127 // RocketMQ's topic and group name limit
	MaxBrokers         = 256
	MaxQueues          = 1024 // per broker, read or write
	MaxIDLen           = 255  // client and instance ids
	MaxTopicsPerMember = 1024
	MaxLabels          = 64
	MaxLabelKeyLen     = 63
	MaxLabelValueLen   = 255
	MaxConfigKeys      = 64
	MaxConfigKeyLen    = 128
	MaxConfigValueLen  = 4096
	MaxWeight          = 1_000_000
)

// WeightLabel is the member label that is also passed to the strategy as the integer metric
// "weight".
const WeightLabel = "weight"

// CheckName checks a topic or group name against RocketMQ's rule: 1 to 127 characters among
// letters, digits, '%', '|', '_' and '-'. kind ("topic", "group") names the value in the error.
func CheckName(kind, name string) error {
	if name == "" {
		return invalid("%s name is empty", kind)
	}
	if len(name) > MaxNameLen {
		return invalid("%s name %q is %d characters long, more than %d", kind, name, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return invalid("%s name %q has %q at offset %d; allowed are letters, digits and %%|_-", kind, name, rune(name[i]), i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-'
}

// checkBrokerName also allows '.' and ':', common in broker names ("broker-a", "10.0.0.1:10911").
func checkBrokerName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return invalid("broker name %q must be 1 to %d characters long", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !nameByte(c) && c != '.' && c != ':' {
			return invalid("broker name %q has %q at offset %d; allowed are letters, digits and %%|_-.:", name, rune(c), i)
		}
	}
	return nil
}

// CheckID checks a client id or instance id: 1 to 255 bytes of UTF-8 without control characters.
func CheckID(kind, id string) error {
	if id == "" {
		return invalid("%s is empty", kind)
	}
	if len(id) > MaxIDLen {
		return invalid("%s %q is %d bytes long, more than %d", kind, id, len(id), MaxIDLen)
	}
	return checkText(kind, id)
}

func checkText(kind, s string) error {
	if !utf8.ValidString(s) {
		return invalid("%s %q is not valid UTF-8", kind, s)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return invalid("%s %q has control character %U at offset %d", kind, s, r, i)
		}
	}
	return nil
}

// normalizeTopic checks a topic and returns it with its brokers in canonical (name) order.
func normalizeTopic(name string, brokers []Broker) (Topic, error) {
	if err := CheckName("topic", name); err != nil {
		return Topic{}, err
	}
	if len(brokers) == 0 {
		return Topic{}, invalid("topic %q has no brokers", name)
	}
	if len(brokers) > MaxBrokers {
		return Topic{}, invalid("topic %q has %d brokers, more than %d", name, len(brokers), MaxBrokers)
	}
	bs := slices.Clone(brokers)
	slices.SortFunc(bs, func(a, b Broker) int { return strings.Compare(a.Name, b.Name) })
	for i, b := range bs {
		if err := checkBrokerName(b.Name); err != nil {
			return Topic{}, err
		}
		if i > 0 && bs[i-1].Name == b.Name {
			return Topic{}, invalid("topic %q lists broker %q twice", name, b.Name)
		}
		if b.ReadQueues < 0 || b.ReadQueues > MaxQueues {
			return Topic{}, invalid("broker %q: readQueues %d is outside [0, %d]", b.Name, b.ReadQueues, MaxQueues)
		}
		if b.WriteQueues < 0 || b.WriteQueues > MaxQueues {
			return Topic{}, invalid("broker %q: writeQueues %d is outside [0, %d]", b.Name, b.WriteQueues, MaxQueues)
		}
	}
	return Topic{Name: name, Brokers: bs}, nil
}

// normalizeBinding checks a binding and fills in its defaults (clustering, queue delivery, an
// empty config).
func normalizeBinding(b Binding) (Binding, error) {
	switch b.Model {
	case "":
		b.Model = Clustering
	case Clustering, Broadcasting:
	default:
		return b, invalid("model %q: want %q or %q", b.Model, Clustering, Broadcasting)
	}
	switch b.Delivery {
	case "":
		b.Delivery = QueueDelivery
	case QueueDelivery, MessageDelivery:
	default:
		return b, invalid("delivery %q: want %q or %q", b.Delivery, QueueDelivery, MessageDelivery)
	}
	if b.Strategy == "" && usesPlugin(b) {
		return b, invalid("strategy is required for a clustering group with queue delivery (a plugin name such as \"averagely\")")
	}
	if b.Strategy != "" {
		if err := checkPluginName(b.Strategy); err != nil {
			return b, err
		}
	}
	if len(b.Config) > MaxConfigKeys {
		return b, invalid("config has %d keys, more than %d", len(b.Config), MaxConfigKeys)
	}
	for k, v := range b.Config {
		if k == "" || len(k) > MaxConfigKeyLen {
			return b, invalid("config key %q must be 1 to %d bytes long", k, MaxConfigKeyLen)
		}
		if len(v) > MaxConfigValueLen {
			return b, invalid("config value of %q is %d bytes long, more than %d", k, len(v), MaxConfigValueLen)
		}
		if err := checkText("config key", k); err != nil {
			return b, err
		}
		if !utf8.ValidString(v) {
			return b, invalid("config value of %q is not valid UTF-8", k)
		}
	}
	if err := checkOrderly(b); err != nil {
		return b, err
	}
	if err := checkHandoff(&b); err != nil {
		return b, err
	}
	if b.Config == nil {
		b.Config = map[string]string{}
	} else {
		b.Config = maps.Clone(b.Config)
	}
	return b, nil
}

// checkPluginName allows what a plugin file may be called: NAME.wasm with NAME of letters,
// digits, '_', '-' and '.'.
func checkPluginName(name string) error {
	if len(name) > MaxNameLen {
		return invalid("strategy %q is longer than %d characters", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return invalid("strategy %q has %q at offset %d; a plugin name has letters, digits and _-.", name, rune(c), i)
		}
	}
	return nil
}

// usesPlugin reports whether a binding's assignment comes from its strategy: only clustering
// groups with queue delivery. Broadcasting gives every member every queue; message delivery
// lets every member read every queue.
func usesPlugin(b Binding) bool { return b.Model == Clustering && b.Delivery == QueueDelivery }

func equalBinding(a, b Binding) bool {
	return a.Strategy == b.Strategy && a.Model == b.Model && a.Delivery == b.Delivery && a.Orderly == b.Orderly &&
		handoffMode(a) == handoffMode(b) && a.RevokeTimeout == b.RevokeTimeout && maps.Equal(a.Config, b.Config)
}

// Heartbeat is what a member reports about itself.
type Heartbeat struct {
	CID        string            `json:"cid"`
	Topics     []string          `json:"topics"`
	InstanceID string            `json:"instanceId"`
	Labels     map[string]string `json:"labels"`
	// Generations are the generations the member has applied, per topic; shown in the status.
	Generations map[string]int64 `json:"generations"`
	// Offsets are, per topic, the offsets of the queues the member owns: the group status
	// shows them as lag (lag.go), and for an auto-scaled topic they tell the auto-scaler when a
	// queue to remove is drained (autoscale.go).
	Offsets map[string][]QueueOffset `json:"offsets,omitempty"`
	// Confirms says the member reports a generation in Generations only once it has stopped
	// work on the queues the generation took away: cooperative handoff waits for it. A member
	// that never says so nor reports a generation is handed off eagerly (handoff.go).
	Confirms bool `json:"confirms,omitempty"`
}

// Check validates a heartbeat, naming the first bad value.
func (h *Heartbeat) Check() error {
	if err := CheckID("cid", h.CID); err != nil {
		return err
	}
	if h.InstanceID != "" {
		if err := CheckID("instanceId", h.InstanceID); err != nil {
			return err
		}
	}
	if len(h.Topics) > MaxTopicsPerMember {
		return invalid("member subscribes %d topics, more than %d", len(h.Topics), MaxTopicsPerMember)
	}
	for _, t := range h.Topics {
		if err := CheckName("topic", t); err != nil {
			return err
		}
	}
	if len(h.Labels) > MaxLabels {
		return invalid("member has %d labels, more than %d", len(h.Labels), MaxLabels)
	}
	for k, v := range h.Labels {
		if k == "" || len(k) > MaxLabelKeyLen {
			return invalid("label key %q must be 1 to %d bytes long", k, MaxLabelKeyLen)
		}
		if err := checkText("label key", k); err != nil {
			return err
		}
		if len(v) > MaxLabelValueLen {
			return invalid("label %q has a %d-byte value, more than %d", k, len(v), MaxLabelValueLen)
		}
		if err := checkText("label "+strconv.Quote(k), v); err != nil {
			return err
		}
		if k == WeightLabel {
			if _, err := parseWeight(v); err != nil {
				return err
			}
		}
	}
	if len(h.Generations) > MaxTopicsPerMember {
		return invalid("member reports %d generations, more than %d", len(h.Generations), MaxTopicsPerMember)
	}
	for t, n := range h.Generations {
		if err := CheckName("topic", t); err != nil {
			return err
		}
		if n < 0 {
			return invalid("generation %d of topic %q is negative", n, t)
		}
	}
	return checkHeartbeatOffsets(h.Offsets)
}

func parseWeight(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > MaxWeight {
		return 0, invalid("label weight %q is not an integer in [0, %d]", v, MaxWeight)
	}
	return n, nil
}

// ReadQueues lists a topic's readable queues in canonical order (abi.CompareQueues): the
// queues a group's strategy divides.
func ReadQueues(t Topic) []abi.Queue {
	return queues(t, func(b Broker) int { return b.ReadQueues })
}

// WriteQueues lists a topic's writable queues in canonical order: the queues producers send to.
func WriteQueues(t Topic) []abi.Queue {
	return queues(t, func(b Broker) int { return b.WriteQueues })
}

func queues(t Topic, count func(Broker) int) []abi.Queue {
	n := 0
	for _, b := range t.Brokers {
		n += count(b)
	}
	qs := make([]abi.Queue, 0, n)
	for _, b := range t.Brokers {
		for id := 0; id < count(b); id++ {
			qs = append(qs, abi.Queue{Topic: t.Name, BrokerName: b.Name, QueueID: int32(id)})
		}
	}
	slices.SortFunc(qs, abi.CompareQueues)
	return qs
}
