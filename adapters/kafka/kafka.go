// Package kafka runs allocd strategies as franz-go group balancers: the group's leader computes
// the plan with the plugin, from a watched .wasm file or from a daemon's module (see package
// strategy), on Kafka's classic consumer-group protocol.
//
//	bal, err := kafka.NewBalancer(ctx, kafka.Config{PluginFile: "sticky.wasm", Labels: map[string]string{"zone": "a"}})
//	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.Balancers(bal))
//
// A partition is a queue (its topic, broker name "", queue id the partition), a member is a
// consumer (its instance id when it has one, so a restarted static member keeps its id, else
// its member id). Members' labels travel in their join metadata's user data; each partition's
// previous owner comes from the members' owned partitions, so a sticky plugin keeps partitions
// across rebalances; a partition leader's rack, where the client knows it, is the queue's
// "zone" label (KIP-881). Cooperative mode (the default, KIP-429) revokes before it moves.
//
// The balancer never breaks the group: when the plugin fails or answers a plan that leaves a
// partition unowned, it keeps every partition with its current owner where that owner is still
// a member and deals the rest out round-robin, and says so in the log and through OnError.
package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/allocd/allocd/strategy"
)

// Config says which strategy to run and how this member describes itself.
type Config struct {
	PluginFile string            // a .wasm file, watched and hot-reloaded
	Daemon     string            // or an allocd daemon's base URL ...
	Strategy   string            // ... and the plugin's name there
	Config     map[string]string // the binding's config, e.g. {"vnodes": "10"}
	Labels     map[string]string // this member's labels (zone, weight), carried to the leader
	Eager      bool              // default false: cooperative (KIP-429) rebalancing

	// CacheDir keeps compiled plugins and the daemon's last good module (strategy.Config).
	CacheDir string
	// Logger receives fallbacks and reloads; OnError, when set, hears every plan that fell
	// back, with why.
	Logger  zerolog.Logger
	OnError func(error)
	// Timeout bounds one plan's computation (10 s); a slower plugin falls back.
	Timeout time.Duration
}

// Balancer is a kgo.GroupBalancer backed by an allocd strategy.
type Balancer struct {
	cfg      Config
	s        *strategy.Strategy
	log      zerolog.Logger
	userData []byte

	// intended is this member's last plan as a leader, before the cooperative adjustment:
	// topic => partition => consumer id. A partition that the adjustment held back for a
	// revocation, or whose owner restarted (a static member keeps its id), has no owner in
	// the next round's metadata; its intended owner stands in as the previous owner, so the
	// plugin's second round finishes the first instead of starting over.
	mu       sync.Mutex
	intended map[string]map[int32]string
}

var _ kgo.GroupBalancer = (*Balancer)(nil)

// userData is what a member tells the leader, in its join metadata's user data.
type userData struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// NewBalancer loads the strategy and returns once it can answer.
func NewBalancer(ctx context.Context, cfg Config) (*Balancer, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	s, err := strategy.Open(ctx, strategy.Config{
		File: cfg.PluginFile, Daemon: cfg.Daemon, Name: cfg.Strategy, CacheDir: cfg.CacheDir, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	ud, err := json.Marshal(userData{Labels: cfg.Labels})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("kafka: labels: %w", err)
	}
	return &Balancer{cfg: cfg, s: s, log: cfg.Logger.With().Str("component", "allocd-kafka").Logger(), userData: ud}, nil
}

// Close releases the plugin.
func (b *Balancer) Close() error { return b.s.Close() }

// ProtocolName is "allocd", whatever the plugin: Kafka admits a member only if it shares a
// protocol name with the group, so a rolling change from one plugin to another (or a hot
// reload) never locks members out. The leader's plugin computes the plan.
func (b *Balancer) ProtocolName() string { return "allocd" }

// IsCooperative is true unless Config.Eager.
func (b *Balancer) IsCooperative() bool { return !b.cfg.Eager }

// JoinGroupMetadata is a version 3 consumer member metadata: the topics, the partitions this
// member owns (the previous owners the leader's plugin sees), the generation, the labels, and
// the "zone" label as the member's rack.
func (b *Balancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.UserData = b.userData
	meta.Generation = generation
	if zone := b.cfg.Labels["zone"]; zone != "" {
		// A member's rack makes the leader's client load each partition leader's rack
		// (KIP-881), which becomes the queue's zone.
		meta.Rack = &zone
	}
	for _, t := range slices.Sorted(maps.Keys(current)) {
		p := kmsg.NewConsumerMemberMetadataOwnedPartition()
		p.Topic, p.Partitions = t, current[t]
		meta.OwnedPartitions = append(meta.OwnedPartitions, p)
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment decodes the leader's plan for this member.
func (b *Balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

// MemberBalancer decodes the members' metadata for the leader.
func (b *Balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// member is one group member as the plan sees it.
type member struct {
	m      *kmsg.JoinGroupResponseMember
	id     string // the consumer id the plugin sees
	topics map[string]bool
	labels map[string]string
}

// Balance computes the plan on the leader.
func (b *Balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	members, owners := b.members(cb)
	b.mu.Lock()
	intended := b.intended
	b.mu.Unlock()
	plan, err := b.plan(cb, members, owners, intended, topics)
	if err != nil {
		b.log.Error().Err(err).Str("group", cb.Info().Group).Int32("generation", cb.Info().Generation).
			Msg("strategy failed; keeping current owners and dealing out the rest round-robin")
		if b.cfg.OnError != nil {
			b.cfg.OnError(err)
		}
		plan = fallback(cb, members, owners, topics)
	}
	b.mu.Lock()
	b.intended = plan.intended
	b.mu.Unlock()
	if !b.cfg.Eager {
		plan.plan.AdjustCooperative(cb)
	}
	return plan.plan
}

// builder makes a plan and notes each partition's intended owner by consumer id.
type builder struct {
	plan     *kgo.BalancePlan
	intended map[string]map[int32]string
}

func newBuilder(cb *kgo.ConsumerBalancer) *builder {
	return &builder{plan: cb.NewPlan(), intended: map[string]map[int32]string{}}
}

func (b *builder) add(m member, topic string, p int32) {
	b.plan.AddPartition(m.m, topic, p)
	if b.intended[topic] == nil {
		b.intended[topic] = map[int32]string{}
	}
	b.intended[topic][p] = m.id
}

// members reads the members' ids, topics and labels, and who owns which partition now.
func (b *Balancer) members(cb *kgo.ConsumerBalancer) ([]member, map[string]map[int32]int) {
	var members []member
	owners := map[string]map[int32]int{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := member{m: m, id: m.MemberID, topics: map[string]bool{}}
		if m.InstanceID != nil && *m.InstanceID != "" {
			mb.id = *m.InstanceID
		}
		for _, t := range meta.Topics {
			mb.topics[t] = true
		}
		var ud userData
		if len(meta.UserData) > 0 && json.Unmarshal(meta.UserData, &ud) == nil {
			mb.labels = ud.Labels
		}
		if m.InstanceID != nil && *m.InstanceID != "" {
			mb.labels = maps.Clone(mb.labels)
			if mb.labels == nil {
				mb.labels = map[string]string{}
			}
			mb.labels["instanceId"] = *m.InstanceID
		}
		i := len(members)
		for _, op := range meta.OwnedPartitions {
			if owners[op.Topic] == nil {
				owners[op.Topic] = map[int32]int{}
			}
			for _, p := range op.Partitions {
				if _, taken := owners[op.Topic][p]; !taken {
					owners[op.Topic][p] = i
				}
			}
		}
		members = append(members, mb)
	})
	return members, owners
}

// plan asks the plugin, once per set of topics that the same members subscribe to (usually
// one set: every member reads every topic).
func (b *Balancer) plan(cb *kgo.ConsumerBalancer, members []member, owners map[string]map[int32]int, intended map[string]map[int32]string, topics map[string]int32) (*builder, error) {
	ids := map[string]int{}
	for i, m := range members {
		ids[m.id] = i
	}
	racks := cb.PartitionRacks()
	sets := map[string][]string{} // subscriber set => topics
	subs := map[string][]int{}
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		var who []int
		var key strings.Builder
		for i, m := range members {
			if m.topics[t] {
				who = append(who, i)
				fmt.Fprintf(&key, "%d,", i)
			}
		}
		if len(who) == 0 {
			continue
		}
		sets[key.String()] = append(sets[key.String()], t)
		subs[key.String()] = who
	}
	plan := newBuilder(cb)
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	for _, key := range slices.Sorted(maps.Keys(sets)) {
		who := subs[key]
		g := &strategy.Group{Name: cb.Info().Group, Config: b.cfg.Config}
		for _, i := range who {
			g.Consumers = append(g.Consumers, strategy.Consumer{ID: members[i].id, Labels: members[i].labels})
		}
		for _, t := range sets[key] {
			for p := range topics[t] {
				q := strategy.Queue{Topic: t, QueueID: p}
				if o, ok := owners[t][p]; ok && members[o].topics[t] {
					q.PrevOwner = members[o].id
				} else if id, ok := intended[t][p]; ok {
					if i, ok := ids[id]; ok && members[i].topics[t] {
						q.PrevOwner = id
					}
				}
				if r := racks[t]; int(p) < len(r) && r[p] != "" {
					q.Labels = map[string]string{"zone": r[p]}
				}
				g.Queues = append(g.Queues, q)
			}
		}
		a, err := b.s.Assign(ctx, g)
		if err != nil {
			return nil, err
		}
		owned := 0
		for c, qs := range a.Owned {
			m := members[who[c]]
			for _, q := range qs {
				plan.add(m, g.Queues[q].Topic, g.Queues[q].QueueID)
			}
			owned += len(qs)
		}
		if owned != len(g.Queues) {
			return nil, fmt.Errorf("kafka: strategy %s left %d of %d partitions without an owner", b.s.Name(), len(g.Queues)-owned, len(g.Queues))
		}
	}
	return plan, nil
}

// fallback keeps every partition with its current owner where that owner is still a member
// subscribed to the topic, and deals the rest out round-robin among the topic's subscribers.
func fallback(cb *kgo.ConsumerBalancer, members []member, owners map[string]map[int32]int, topics map[string]int32) *builder {
	plan := newBuilder(cb)
	next := 0
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		var who []int
		for i, m := range members {
			if m.topics[t] {
				who = append(who, i)
			}
		}
		if len(who) == 0 {
			continue
		}
		for p := range topics[t] {
			if o, ok := owners[t][p]; ok && members[o].topics[t] {
				plan.add(members[o], t, p)
				continue
			}
			plan.add(members[who[next%len(who)]], t, p)
			next++
		}
	}
	return plan
}
