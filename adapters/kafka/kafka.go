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
	"encoding/binary"
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

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
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
	// Host sets the plugin's limits: each call's deadline, which also bounds a new version's
	// start (_initialize), memory and instances (strategy.Config.Host; zero values take
	// host.Config's defaults).
	Host host.Config
}

// Balancer is a kgo.GroupBalancer backed by an allocd strategy.
type Balancer struct {
	cfg      Config
	s        *strategy.Strategy
	log      zerolog.Logger
	userData []byte

	// intended is this member's last plan as a leader, before the cooperative adjustment, by
	// consumer id. A partition that the adjustment held back for a revocation, or whose owner
	// restarted (a static member keeps its id), has no owner in the next round's metadata; its
	// intended owner stands in as the previous owner, so the plugin's second round finishes the
	// first instead of starting over.
	mu       sync.Mutex
	intended *intended
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
		File: cfg.PluginFile, Daemon: cfg.Daemon, Name: cfg.Strategy, CacheDir: cfg.CacheDir, Logger: cfg.Logger, Host: cfg.Host,
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

// Balance computes the plan on the leader.
func (b *Balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	g := b.view(cb, topics)
	b.mu.Lock()
	intended := b.intended
	b.mu.Unlock()
	p, err := b.plan(cb, g, intended)
	if err != nil {
		b.log.Error().Err(err).Str("group", cb.Info().Group).Int32("generation", cb.Info().Generation).
			Msg("strategy failed; keeping current owners and dealing out the rest round-robin")
		if b.cfg.OnError != nil {
			b.cfg.OnError(err)
		}
		p = fallback(g)
	}
	next := p.intended()
	b.mu.Lock()
	b.intended = next
	b.mu.Unlock()
	heldBack := 0
	if !b.cfg.Eager {
		heldBack = p.adjustCooperative()
	}
	if e := b.log.Debug(); e.Enabled() {
		e.Str("group", cb.Info().Group).Int32("generation", cb.Info().Generation).Int("members", len(g.members)).
			Int("topics", len(g.topics)).Int("held_back", heldBack).Msg("planned")
	}
	return p
}

// member is one group member as the plan sees it.
type member struct {
	m      *kmsg.JoinGroupResponseMember
	id     string // the consumer id the plugin sees
	gen    int32  // the generation of its owned partitions
	in     []bool // parallel to view.topics: whether it subscribes to the topic
	labels map[string]string
}

// view is the leader's view of a rebalance: the members, the topics to balance, and who
// claims which partition now.
type view struct {
	members []member
	topics  []string       // the topics to balance, sorted
	counts  []int32        // parallel to topics: their partition counts
	index   map[string]int // topic => its position in topics
	// prev is each partition's current owner, as an index into members (-1 for none): the first
	// member that claims it.
	prev [][]int32
	// claims lists every member's claim on a partition being balanced, in member order.
	claims []claim
}

// claim is a member's claim (an owned partition in its join metadata): positions in
// view.topics and view.members.
type claim struct{ topic, partition, member int32 }

// view reads the members' ids, topics and labels, and who owns which partition now.
func (b *Balancer) view(cb *kgo.ConsumerBalancer, topics map[string]int32) *view {
	g := &view{topics: slices.Sorted(maps.Keys(topics)), index: make(map[string]int, len(topics))}
	g.counts = make([]int32, len(g.topics))
	for i, t := range g.topics {
		g.index[t] = i
		g.counts[i] = topics[t]
	}
	g.prev = nobody(g.counts)
	g.members = make([]member, 0, len(cb.Members()))
	in := make([]bool, len(g.topics)*len(cb.Members()))
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := member{m: m, id: m.MemberID, gen: meta.Generation, in: in[:len(g.topics):len(g.topics)]}
		in = in[len(g.topics):]
		if m.InstanceID != nil && *m.InstanceID != "" {
			mb.id = *m.InstanceID
		}
		for _, t := range meta.Topics {
			if i, ok := g.index[t]; ok {
				mb.in[i] = true
			}
		}
		// "{}" is what a member without labels sends: no decoding for it.
		if ud := meta.UserData; len(ud) > 0 && string(ud) != "{}" {
			var u userData
			if json.Unmarshal(ud, &u) == nil {
				mb.labels = u.Labels
			}
		}
		if m.InstanceID != nil && *m.InstanceID != "" {
			mb.labels = maps.Clone(mb.labels)
			if mb.labels == nil {
				mb.labels = map[string]string{}
			}
			mb.labels["instanceId"] = *m.InstanceID
		}
		i := int32(len(g.members))
		for _, op := range meta.OwnedPartitions {
			t, ok := g.index[op.Topic]
			if !ok {
				continue
			}
			for _, p := range op.Partitions {
				if p >= 0 && p < g.counts[t] {
					g.claims = append(g.claims, claim{int32(t), p, i})
					if g.prev[t][p] < 0 {
						g.prev[t][p] = i
					}
				}
			}
		}
		g.members = append(g.members, mb)
	})
	return g
}

// plan asks the plugin, once per set of topics that the same members subscribe to (usually
// one set: every member reads every topic).
func (b *Balancer) plan(cb *kgo.ConsumerBalancer, g *view, intended *intended) (*assignment, error) {
	members := g.members
	// The intended owners' ids as indices into members (-1: gone): one lookup per id, not
	// per partition.
	var was []int32
	if intended != nil {
		ids := make(map[string]int32, len(members))
		for i, m := range members {
			ids[m.id] = int32(i)
		}
		was = make([]int32, len(intended.ids))
		for k, id := range intended.ids {
			if i, ok := ids[id]; ok {
				was[k] = i
			} else {
				was[k] = -1
			}
		}
	}
	racks := cb.PartitionRacks()
	sets := map[string][]int{} // subscriber set => topic positions
	subs := map[string][]int{}
	key := make([]byte, 0, len(members))
	for t := range g.topics {
		var who []int
		key = key[:0]
		for i, m := range members {
			if m.in[t] {
				who = append(who, i)
				key = binary.AppendUvarint(key, uint64(i))
			}
		}
		if len(who) == 0 {
			continue
		}
		sets[string(key)] = append(sets[string(key)], t)
		subs[string(key)] = who
	}
	p := newPlan(g)
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	var subscribed []bool
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		// The plugin's request in canonical order: consumers sorted by id, queues by topic
		// and partition.
		who := slices.SortedFunc(slices.Values(subs[k]), func(a, c int) int { return strings.Compare(members[a].id, members[c].id) })
		req := &abi.Request{Group: cb.Info().Group, Config: b.cfg.Config, Consumers: make([]string, len(who))}
		var labeled bool
		for c, i := range who {
			req.Consumers[c] = members[i].id
			labeled = labeled || len(members[i].labels) > 0
		}
		if labeled {
			req.ConsumerAttrs = make([]abi.Attrs, len(who))
			for c, i := range who {
				req.ConsumerAttrs[c].Labels = members[i].labels
			}
		}
		n := 0
		for _, t := range sets[k] {
			n += int(g.counts[t])
		}
		req.Queues = make([]abi.Queue, 0, n)
		prev := make([]string, 0, n)
		var zones []abi.Attrs
		var hasPrev bool
		zoneOf := map[string]map[string]string{} // one label map per rack, shared by its partitions
		// The topics' subscribers by member index, so that a partition costs no map lookup.
		subscribed = slices.Grow(subscribed[:0], len(members))[:len(members)]
		clear(subscribed)
		for _, i := range subs[k] {
			subscribed[i] = true
		}
		for _, t := range sets[k] {
			name := g.topics[t]
			r, cur := racks[name], g.prev[t]
			var in []int32
			if intended != nil {
				in = intended.owners[name]
			}
			for q := range g.counts[t] {
				req.Queues = append(req.Queues, abi.Queue{Topic: name, QueueID: q})
				var po string
				if c := cur[q]; c >= 0 && subscribed[c] {
					po = members[c].id
				} else if int(q) < len(in) && in[q] >= 0 {
					if i := was[in[q]]; i >= 0 && subscribed[i] {
						po = members[i].id
					}
				}
				hasPrev = hasPrev || po != ""
				prev = append(prev, po)
				if int(q) < len(r) && r[q] != "" {
					if zones == nil {
						zones = make([]abi.Attrs, len(req.Queues)-1, n)
					}
					z := zoneOf[r[q]]
					if z == nil {
						z = map[string]string{"zone": r[q]}
						zoneOf[r[q]] = z
					}
					zones = append(zones, abi.Attrs{Labels: z})
				} else if zones != nil {
					zones = append(zones, abi.Attrs{})
				}
			}
		}
		if hasPrev {
			req.PrevOwners = prev
		}
		req.QueueAttrs = zones
		var taken error // the plan's own check of the answer, read in the instance's memory
		if err := b.s.AssignOwnersFunc(ctx, req, func(resp *abi.Response, _ strategy.Version) error {
			taken = p.take(sets[k], who, resp)
			return nil
		}); err != nil {
			return nil, err
		}
		if taken != nil {
			return nil, fmt.Errorf("kafka: strategy %s %w", b.s.Name(), taken)
		}
	}
	return p, nil
}

// fallback keeps every partition with its current owner where that owner is still a member
// subscribed to the topic, and deals the rest out round-robin among the topic's subscribers.
func fallback(g *view) *assignment {
	p := newPlan(g)
	next := 0
	var who []int
	for t := range g.topics {
		who = who[:0]
		for i, m := range g.members {
			if m.in[t] {
				who = append(who, i)
			}
		}
		if len(who) == 0 {
			continue
		}
		for q, o := range g.prev[t] {
			if o >= 0 && g.members[o].in[t] {
				p.owners[t][q] = o
				continue
			}
			p.owners[t][q] = int32(who[next%len(who)])
			next++
		}
	}
	return p
}
