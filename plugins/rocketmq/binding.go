package rocketmq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/allocd/allocd/abi"
)

// Java's strategy names (getName()), as the vectors' "strategy" field gives them.
const (
	StrategyAvg            = "AVG"
	StrategyAvgByCircle    = "AVG_BY_CIRCLE"
	StrategyConsistentHash = "CONSISTENT_HASH"
	StrategyConfig         = "CONFIG"
	StrategyMachineRoom    = "MACHINE_ROOM"
	StrategyNearby         = "MACHINE_ROOM_NEARBY"
)

// The labels and config keys through which allocd's built-in plugins take what Java's strategies
// are constructed with.
const (
	// LabelQueues is a consumer's label holding its CONFIG list: a JSON array of
	// {"topic","brokerName","queueId"} objects.
	LabelQueues = "queues"
	// ConfigConsumerIDCs is MACHINE_ROOM's set of rooms: a JSON array of strings.
	ConfigConsumerIDCs = "consumeridcs"
	// LabelZone is the machine room of a queue or a consumer, for MACHINE_ROOM_NEARBY.
	LabelZone = "zone"
	// ConfigInner names MACHINE_ROOM_NEARBY's inner strategy: averagely, circle or hash.
	ConfigInner = "inner"
	// ConfigVnodes is CONSISTENT_HASH's virtual-node count.
	ConfigVnodes = "vnodes"
)

// PluginFor returns allocd's built-in plugin of a Java strategy name, or "" for none.
func PluginFor(strategy string) string {
	switch strategy {
	case StrategyAvg:
		return "averagely"
	case StrategyAvgByCircle:
		return "circle"
	case StrategyConsistentHash:
		return "hash"
	case StrategyConfig:
		return "config"
	case StrategyMachineRoom:
		return "machineroom"
	case StrategyNearby:
		return "nearby"
	}
	return ""
}

// SettledKeys returns the config keys whose value a vector of strategy settles, set or unset:
// a vector without one means Java's default (CONSISTENT_HASH's 10 virtual nodes, MACHINE_ROOM's
// never-set set), whatever a binding's config says.
func SettledKeys(strategy string) []string {
	switch strategy {
	case StrategyConsistentHash:
		return []string{ConfigVnodes}
	case StrategyMachineRoom:
		return []string{ConfigConsumerIDCs}
	case StrategyNearby:
		return []string{ConfigInner, ConfigVnodes}
	}
	return nil
}

// Binding is how allocd reproduces one vector: the built-in plugin, its config, and the labels of
// the queues and consumers (nil, or parallel to MQAll and CIDAll; a nil map is no label).
type Binding struct {
	Plugin         string
	Config         map[string]string
	QueueLabels    []map[string]string
	ConsumerLabels []map[string]string
}

// Bindings returns the binding of every vector, bs[i] for vs[i]. CONFIG's lists belong to the
// consumers: each member's label LabelQueues is the list recorded in its own vector of the same
// scenario (Java constructs one strategy per consumer), so that a whole-group request built from
// any vector of the scenario carries every member's list.
func Bindings(vs []Vector) []Binding {
	lists := map[GroupKey]map[string]string{} // CONFIG: group -> cid -> label text
	for i := range vs {
		v := &vs[i]
		if v.Strategy != StrategyConfig || !v.MemberOfCidAll || !v.HasConfigured {
			continue
		}
		k := v.Key()
		if lists[k] == nil {
			lists[k] = map[string]string{}
		}
		qs := make([]Queue, len(v.Configured))
		for j, x := range v.Configured {
			qs[j] = v.MQAll[x]
		}
		text, _ := json.Marshal(qs)
		lists[k][v.CID] = string(text)
	}
	bs := make([]Binding, len(vs))
	for i := range vs {
		v := &vs[i]
		b := Binding{Plugin: PluginFor(v.Strategy)}
		switch v.Strategy {
		case StrategyConsistentHash:
			if !v.VnodesDefault {
				b.Config = map[string]string{ConfigVnodes: strconv.Itoa(v.Vnodes)}
			}
		case StrategyConfig:
			own := lists[v.Key()]
			b.ConsumerLabels = make([]map[string]string, len(v.CIDAll))
			for j, cid := range v.CIDAll {
				if text, ok := own[cid]; ok {
					b.ConsumerLabels[j] = map[string]string{LabelQueues: text}
				}
			}
		case StrategyMachineRoom:
			if v.HasConsumerIDCs {
				text, _ := json.Marshal(v.ConsumerIDCs)
				b.Config = map[string]string{ConfigConsumerIDCs: string(text)}
			}
		case StrategyNearby:
			b.Config = map[string]string{ConfigInner: PluginFor(v.Inner)}
			b.QueueLabels = roomLabels(v.MQRooms, len(v.MQAll))
			b.ConsumerLabels = roomLabels(v.CIDRooms, len(v.CIDAll))
		}
		bs[i] = b
	}
	return bs
}

func roomLabels(rooms []*string, n int) []map[string]string {
	out := make([]map[string]string, n)
	for i := range out {
		if i < len(rooms) && rooms[i] != nil {
			out[i] = map[string]string{LabelZone: *rooms[i]}
		}
	}
	return out
}

// Request is v's call as an allocd request under binding b: for v.CID alone, or, with whole set,
// for the whole group (no targets).
func (v *Vector) Request(b Binding, whole bool) *abi.Request {
	req := &abi.Request{Group: v.Group, Queues: make([]abi.Queue, len(v.MQAll)), Consumers: append([]string{}, v.CIDAll...)}
	for i, q := range v.MQAll {
		req.Queues[i] = abi.Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}
	}
	if !whole {
		req.Targets = []string{v.CID} // also when the cid is "" (Java's "currentCID is empty")
	}
	if b.Config != nil {
		req.Config = make(map[string]string, len(b.Config))
		for k, val := range b.Config {
			req.Config[k] = val
		}
	}
	req.QueueAttrs = labelAttrs(b.QueueLabels)
	req.ConsumerAttrs = labelAttrs(b.ConsumerLabels)
	return req
}

func labelAttrs(labels []map[string]string) []abi.Attrs {
	if labels == nil {
		return nil
	}
	out := make([]abi.Attrs, len(labels))
	for i, m := range labels {
		if m != nil {
			out[i].Labels = make(map[string]string, len(m))
			for k, val := range m {
				out[i].Labels[k] = val
			}
		}
	}
	return out
}

// GroupKey names the whole group a vector belongs to: its scenario under one strategy
// configuration. The vectors of one key are one call per member of one group (plus outsiders).
type GroupKey struct {
	Strategy, Inner string
	Vnodes          int
	VnodesDefault   bool
	Scenario        int
}

// Key is v's group.
func (v *Vector) Key() GroupKey {
	return GroupKey{v.Strategy, v.Inner, v.Vnodes, v.VnodesDefault, v.Scenario}
}

// Mismatch compares allocd's answer for v with Want: the queues got, in order, or, when failed,
// the error message errMsg, which must contain Java's (WantError). It returns "" when they agree,
// else what differs, with queues as indices into v.MQAll.
func (v *Vector) Mismatch(got []abi.Queue, failed bool, errMsg string) string {
	want, wantFail := v.Want()
	switch {
	case wantFail && failed:
		if !strings.Contains(errMsg, v.WantError()) {
			return fmt.Sprintf("consumer %q: error %q, Java threw %q", v.CID, errMsg, v.Error)
		}
		return ""
	case wantFail:
		return fmt.Sprintf("consumer %q: answered %v where Java threw %q", v.CID, v.indices(got), v.Error)
	case failed:
		return fmt.Sprintf("consumer %q: error %q where Java returned %v", v.CID, errMsg, want)
	}
	if idx := v.indices(got); !slices.Equal(idx, want) {
		return fmt.Sprintf("consumer %q: answered %v, Java returned %v (indices into the vector's mqAll)", v.CID, idx, want)
	}
	return ""
}

// indices maps queues to their first index in v.MQAll (-1 for one that is not there).
func (v *Vector) indices(qs []abi.Queue) []int {
	out := make([]int, len(qs))
	for i, q := range qs {
		out[i] = slices.Index(v.MQAll, Queue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID})
	}
	return out
}
