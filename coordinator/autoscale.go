package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/store"
)

// Auto-scaling: the coordinator drives one autoscale.Topic (a pure state machine) per topic
// that has a policy. It feeds it the membership of every group subscribed to the topic, the
// offsets members and brokers report, the generations members confirm, and clock ticks; it
// applies the steps it returns to the topic record's counts, saving the counts and the
// machine's State in one store transaction, so a pending step survives a restart and resumes.
//
// Every input is handled under c.mu, like every other change of the model, and the steps of
// an input are applied (stored) before the next input is judged. Membership is fed from Tick:
// heartbeats only mark groups dirty, as they already do for rebalancing, so a burst of joins
// costs one snapshot per group, and heartbeats write nothing unless a member's offsets or
// confirmation change what must be saved (a step, a plan, a group's first commit on a queue).
//
// Confirmations: the autoscale package wants to hear that a member applied an assignment
// computed over the topic's current layout (its readable queue set). A member reports the
// generation numbers it applied; the coordinator notes, per (group, topic), which layout each
// generation number covers. A generation covers the current layout when it is in force and its
// (group, topic) is not dirty: every input since it was computed, a queue change included,
// would have marked it dirty. Since generation numbers and layouts only grow, a member that
// applied number n confirms the layout noted for the highest number up to n.

// scaleBucket is the store bucket of the autoscale States, one per topic, keyed by topic name.
const scaleBucket = "autoscale"

// MaxOffsets bounds the offsets one report may carry.
const MaxOffsets = 65536

// autoscaler is the coordinator's auto-scaling side, guarded by c.mu.
type autoscaler struct {
	topics map[string]*scaled
	m      *scaleMetrics
}

// scaled is one auto-scaled topic.
type scaled struct {
	t *autoscale.Topic
	// saved is the State last written to the store: what the topic goes back to when a write
	// fails. unsaved: the store's copy is older than t (a store without TopicTx accepted the
	// counts but refused the State); the next commit writes it.
	saved   autoscale.State
	unsaved bool
	// fed is, per group, the snapshot last passed to SetGroup. A group restored from the
	// store and not fed yet has a zero key.
	fed map[string]fedKey
	// restored holds, during the restart grace, the members of each restored group: the
	// group's membership is not fed until they are all back (or the grace ends), so that a
	// restart does not look like everyone leaving.
	restored map[string][]string
	// gens notes, per group, the layout each generation number covers.
	gens map[string]*genLayouts
	// After a store failure, inputs wait until retryAt.
	failures int
	retryAt  time.Time
}

type fedKey struct {
	g     *group
	seq   uint64
	model Model
}

type genLayout struct {
	number int64
	layout uint64
}

type genLayouts struct {
	g    *group // a group deleted and created again numbers its generations afresh
	list []genLayout
}

// maxGenLayouts bounds the generation numbers remembered per (group, topic): members apply
// new generations within a heartbeat or two, so only the last few matter.
const maxGenLayouts = 32

// TopicView is GET /v1/topics/{topic}: the topic record (with its counts and policy)
// and, for an auto-scaled topic, what the scaler is doing: the target and why, and the pending
// step and what it waits for (the members that have not confirmed, or the queues not drained,
// with the group and how many messages behind).
type TopicView struct {
	Topic
	Autoscaling *autoscale.Status `json:"autoscaling,omitempty"`
}

// QueueOffset is what a member (in its heartbeat) or a broker (POST /v1/topics/{topic}/offsets)
// reports about one queue. Committed is the group's committed offset (ignored in a broker's
// report), Max the next offset to be written, LastWrite the store time of the queue's last
// message. A Committed or Max of -1, or absent, means unknown, as RocketMQ reports it.
type QueueOffset struct {
	BrokerName string    `json:"brokerName"`
	QueueID    int32     `json:"queueId"`
	Committed  int64     `json:"committed"`
	Max        int64     `json:"max"`
	LastWrite  time.Time `json:"lastWrite,omitzero"`
}

// UnmarshalJSON reads an absent committed or max offset as -1, unknown: reading it as 0 would
// make an unreported queue look empty, hence drained.
func (o *QueueOffset) UnmarshalJSON(b []byte) error {
	type plain QueueOffset
	p := plain{Committed: -1, Max: -1}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*o = QueueOffset(p)
	return nil
}

// checkOffsets validates an offset report, naming the first bad value.
func checkOffsets(what string, offsets []QueueOffset) error {
	if len(offsets) > MaxOffsets {
		return invalid("%s: %d offsets, more than %d", what, len(offsets), MaxOffsets)
	}
	for i, o := range offsets {
		if err := checkBrokerName(o.BrokerName); err != nil {
			return invalid("%s[%d]: %v", what, i, err)
		}
		if o.QueueID < 0 || o.QueueID >= MaxQueues {
			return invalid("%s[%d]: queueId %d is outside [0, %d)", what, i, o.QueueID, MaxQueues)
		}
		if o.Committed < -1 || o.Max < -1 {
			return invalid("%s[%d]: committed %d, max %d: an offset is at least -1 (unknown)", what, i, o.Committed, o.Max)
		}
	}
	return nil
}

// checkHeartbeatOffsets validates a heartbeat's offsets.
func checkHeartbeatOffsets(offsets map[string][]QueueOffset) error {
	if len(offsets) > MaxTopicsPerMember {
		return invalid("member reports offsets of %d topics, more than %d", len(offsets), MaxTopicsPerMember)
	}
	n := 0
	for t, offs := range offsets {
		if err := CheckName("topic", t); err != nil {
			return err
		}
		if n += len(offs); n > MaxOffsets {
			return invalid("member reports %d offsets or more, more than %d", n, MaxOffsets)
		}
		if err := checkOffsets("offsets of topic "+t, offs); err != nil {
			return err
		}
	}
	return nil
}

func toAutoscale(offsets []QueueOffset) []autoscale.Offset {
	out := make([]autoscale.Offset, len(offsets))
	for i, o := range offsets {
		out[i] = autoscale.Offset{Broker: o.BrokerName, Queue: int(o.QueueID), Committed: o.Committed, Max: o.Max, LastWrite: o.LastWrite}
	}
	return out
}

// ParsePolicy reads the "autoscale" object of a topic declaration: fields left out take their
// defaults (autoscale.DefaultPolicy), unknown fields are refused. An empty or null document is
// no policy (nil). The policy is validated, and the error names the bad value.
func ParsePolicy(raw []byte) (*autoscale.Policy, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	p := autoscale.DefaultPolicy()
	if err := json.Unmarshal(raw, &p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return nil, invalid("autoscale: JSON %s where an object is wanted", te.Value)
			}
			want := "a duration string such as \"10s\""
			switch t := te.Type.String(); {
			case strings.Contains(t, "int"):
				want = "an integer"
			case strings.Contains(t, "bool"):
				want = "a boolean"
			}
			return nil, invalid("autoscale: field %q: JSON %s where %s is wanted", te.Field, te.Value, want)
		}
		msg := strings.TrimPrefix(err.Error(), "autoscale: policy: ")
		return nil, invalid("autoscale: %s", strings.ReplaceAll(msg, "json: ", ""))
	}
	if err := checkPolicy(p); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkPolicy validates a policy for this daemon: autoscale's rules, and a max within the
// queues a broker may have here.
func checkPolicy(p autoscale.Policy) error {
	if err := p.Validate(); err != nil {
		return invalid("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if p.Max > MaxQueues {
		return invalid("autoscale: policy max %d out of range: a broker has at most %d queues", p.Max, MaxQueues)
	}
	return nil
}

// loadAutoscale creates the scaled topics at start: each resumes from its saved State, or
// starts afresh when there is none. Called by New before the coordinator is shared.
func (c *Coordinator) loadAutoscale(now time.Time) error {
	m, err := newScaleMetrics(c.opts.Metrics)
	if err != nil {
		return err
	}
	c.as = autoscaler{topics: map[string]*scaled{}, m: m}
	saved := map[string]autoscale.State{}
	err = c.store.View(func(tx store.Tx) error {
		return tx.List(scaleBucket, "", func(key string, value []byte) error {
			var s autoscale.State
			if err := json.Unmarshal(value, &s); err != nil {
				c.log.Error().Err(err).Str("topic", key).Msg("autoscale state unreadable; the topic starts afresh")
				return nil
			}
			saved[key] = s
			return nil
		})
	})
	if err != nil {
		return storage(err, "reading autoscale states")
	}
	for _, name := range slices.Sorted(maps.Keys(c.topics)) {
		rec := c.topics[name]
		if rec.Autoscale == nil {
			continue
		}
		sc := &scaled{fed: map[string]fedKey{}, restored: map[string][]string{}, gens: map[string]*genLayouts{}}
		var outs []autoscale.Output
		if s, ok := saved[name]; ok {
			t, err := autoscale.Restore(s)
			if err != nil {
				c.log.Error().Err(err).Str("topic", name).Msg("autoscale state refused; the topic starts afresh")
			} else {
				sc.t, sc.saved = t, s
				for _, g := range s.Groups {
					sc.fed[g.Name] = fedKey{}
					ids := make([]string, len(g.Members))
					for i, m := range g.Members {
						ids[i] = m.ID
					}
					sc.restored[g.Name] = ids
				}
				// The record is the truth about the counts and the policy; they agree with
				// the State unless the store could not write both at once.
				outs = c.syncScaled(sc, rec, now)
				ev := c.log.Info().Str("topic", name).Str("state", s.String())
				if due, ok := t.NextDeadline(); ok {
					ev = ev.Time("due", due)
				}
				ev.Msg("autoscale resumed")
			}
		}
		if sc.t == nil {
			t, err := autoscale.New(name, *rec.Autoscale, scaleBrokers(rec))
			if err != nil {
				c.log.Error().Err(err).Str("topic", name).Msg("autoscale cannot scale this topic")
				continue
			}
			sc.t, sc.saved, sc.unsaved = t, t.State(), true
		}
		c.as.topics[name] = sc
		if err := c.commitScale(name, sc, outs, now); err != nil {
			return err
		}
	}
	return nil
}

// syncScaled passes the record's policy and broker counts to the scaler as an operator's
// changes, brokers before an enabling policy and after a disabling one.
func (c *Coordinator) syncScaled(sc *scaled, rec Topic, now time.Time) []autoscale.Output {
	var outs []autoscale.Output
	policy := func() {
		out, err := sc.t.SetPolicy(now, *rec.Autoscale)
		if err != nil {
			c.log.Error().Err(err).Str("topic", rec.Name).Msg("autoscale policy refused")
		}
		outs = append(outs, out)
	}
	if !rec.Autoscale.Enabled {
		policy()
	}
	want := map[string]autoscale.Broker{}
	for _, b := range scaleBrokers(rec) {
		want[b.Name] = b
	}
	for _, b := range sc.t.Brokers() {
		if _, ok := want[b.Name]; !ok {
			outs = append(outs, sc.t.RemoveBroker(now, b.Name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		out, err := sc.t.SetBroker(now, want[name])
		if err != nil {
			c.log.Error().Err(err).Str("topic", rec.Name).Msg("autoscale broker refused")
		}
		outs = append(outs, out)
	}
	if rec.Autoscale.Enabled {
		policy()
	}
	return outs
}

func scaleBrokers(t Topic) []autoscale.Broker {
	out := make([]autoscale.Broker, len(t.Brokers))
	for i, b := range t.Brokers {
		out[i] = autoscale.Broker{Name: b.Name, Read: b.ReadQueues, Write: b.WriteQueues}
	}
	return out
}

// PutTopicAutoscale creates or replaces a topic with its auto-scaling policy (nil: none, the
// operator keeps the counts). It reports whether the topic is new.
//
// While a topic is auto-scaled and stays so, the daemon owns the counts of its brokers: the
// counts given for a broker the topic already has are ignored (a declaration applied again at
// every start must not undo the scaling), and those of a new broker are its starting point.
// When scaling is turned on, the counts given are the starting point; when it is turned off,
// they apply.
func (c *Coordinator) PutTopicAutoscale(name string, brokers []Broker, policy *autoscale.Policy) (Topic, bool, error) {
	t, err := normalizeTopic(name, brokers)
	if err != nil {
		return Topic{}, false, err
	}
	// Write queues above read queues strand messages: producers are routed to queues no
	// consumer reads. RocketMQ allows it as a step of a manual resize; allocd's auto-scaler
	// takes those steps itself (read queues first when growing, write queues first when
	// shrinking), so a declared topic is refused rather than accepted with a warning that
	// would not stop the loss.
	for _, b := range t.Brokers {
		if b.WriteQueues > b.ReadQueues {
			return Topic{}, false, invalid("broker %q: writeQueues %d above readQueues %d: producers would send to queues %d-%d, which no consumer reads (raise readQueues first, or let autoscale resize the topic)",
				b.Name, b.WriteQueues, b.ReadQueues, b.ReadQueues, b.WriteQueues-1)
		}
	}
	if policy != nil {
		if err := checkPolicy(*policy); err != nil {
			return Topic{}, false, err
		}
		p := *policy
		t.Autoscale = &p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	old, exists := c.topics[name]
	sc := c.as.topics[name]
	if exists && sc != nil && sc.t.Policy().Enabled && policy != nil && policy.Enabled {
		for i, b := range t.Brokers {
			if j := slices.IndexFunc(old.Brokers, func(o Broker) bool { return o.Name == b.Name }); j >= 0 {
				t.Brokers[i].ReadQueues, t.Brokers[i].WriteQueues = old.Brokers[j].ReadQueues, old.Brokers[j].WriteQueues
			}
		}
	}
	if exists && equalTopic(old, t) {
		return old, false, nil
	}

	if policy == nil {
		if sc != nil {
			err = c.persistScaled(name, &t, nil, nil)
		} else {
			err = c.store.PutTopic(t)
		}
		if err != nil {
			return Topic{}, false, storage(err, "saving topic %q", name)
		}
		if sc != nil {
			delete(c.as.topics, name)
			c.as.m.forget(name)
			c.log.Info().Str("topic", name).Msg("autoscale removed: the operator keeps the counts")
		}
	} else {
		fresh := sc == nil
		var outs []autoscale.Output
		if fresh {
			at, err := autoscale.New(name, *t.Autoscale, scaleBrokers(t))
			if err != nil {
				return Topic{}, false, invalid("%v", err)
			}
			sc = &scaled{t: at, fed: map[string]fedKey{}, restored: map[string][]string{}, gens: map[string]*genLayouts{}}
		} else {
			outs = c.syncScaled(sc, t, now)
		}
		var groups []*group
		for _, g := range c.groups {
			if g.topics[name] != nil {
				groups = append(groups, g)
			}
		}
		outs = append(outs, c.feed(name, sc, groups, now)...)
		// The steps taken by these inputs set the counts stored.
		for i, b := range sc.t.Brokers() {
			t.Brokers[i].ReadQueues, t.Brokers[i].WriteQueues = b.Read, b.Write
		}
		state := sc.t.State()
		if err := c.persistScaled(name, &t, &state, sc); err != nil {
			if !fresh {
				c.rollback(name, sc, now)
			}
			return Topic{}, false, storage(err, "saving topic %q", name)
		}
		sc.saved = state
		if fresh {
			c.as.topics[name] = sc
		}
		c.logScale(name, sc, outs)
	}
	c.topics[name] = t
	if !exists || !slices.Equal(ReadQueues(old), ReadQueues(t)) {
		c.topicChanged(name)
	}
	c.log.Info().Str("topic", name).Bool("created", !exists).Bool("autoscale", t.Autoscale != nil).Msg("topic saved")
	return t, !exists, nil
}

func equalTopic(a, b Topic) bool {
	if !slices.Equal(a.Brokers, b.Brokers) || (a.Autoscale == nil) != (b.Autoscale == nil) {
		return false
	}
	return a.Autoscale == nil || *a.Autoscale == *b.Autoscale
}

// deleteTopicRecord removes a topic's record and its autoscale State, in one transaction when
// the store allows, and forgets its scaler.
func (c *Coordinator) deleteTopicRecord(name string) error {
	sc := c.as.topics[name]
	if sc == nil {
		return c.store.DeleteTopic(name)
	}
	del := func(tx store.Tx) error { return tx.Delete(scaleBucket, name) }
	var err error
	if ts, ok := c.store.(store.TopicTx); ok {
		err = ts.DeleteTopicTx(name, del)
	} else if err = c.store.DeleteTopic(name); err == nil || errors.Is(err, store.ErrNotFound) {
		if uerr := c.store.Update(del); uerr != nil {
			// Harmless: a State without its topic is never restored.
			c.log.Warn().Err(uerr).Str("topic", name).Msg("autoscale state of a deleted topic not removed")
		}
	}
	if err == nil || errors.Is(err, store.ErrNotFound) {
		delete(c.as.topics, name)
		c.as.m.forget(name)
	}
	return err
}

// persistScaled writes the topic record rec (when not nil) and the scaler's state (nil:
// delete it), in one transaction when the store allows. Without TopicTx the record goes first;
// if the State then fails, the record stands and sc is marked unsaved, to be saved by the next
// commit.
func (c *Coordinator) persistScaled(name string, rec *Topic, state *autoscale.State, sc *scaled) error {
	var value []byte
	if state != nil {
		var err error
		if value, err = json.Marshal(state); err != nil {
			return err
		}
	}
	fn := func(tx store.Tx) error {
		if state == nil {
			return tx.Delete(scaleBucket, name)
		}
		return tx.Put(scaleBucket, name, value)
	}
	if rec == nil {
		if err := c.store.Update(fn); err != nil {
			return err
		}
		if sc != nil {
			sc.unsaved = false
		}
		return nil
	}
	if ts, ok := c.store.(store.TopicTx); ok {
		if err := ts.PutTopicTx(*rec, fn); err != nil {
			return err
		}
		if sc != nil {
			sc.unsaved = false
		}
		return nil
	}
	if err := c.store.PutTopic(*rec); err != nil {
		return err
	}
	if err := c.store.Update(fn); err != nil {
		c.log.Error().Err(err).Str("topic", name).Msg("autoscale state not saved after its counts; retrying with the next change")
		if sc != nil {
			sc.unsaved = true
		}
		return nil
	}
	if sc != nil {
		sc.unsaved = false
	}
	return nil
}

// commitScale stores what inputs did to a scaled topic: the counts its steps set, in the topic
// record, and its State, together. Then the record in memory changes, the groups consuming
// the topic are recomputed, and every event is logged and counted. If the store refuses, the
// steps did not happen: the scaler goes back to its last saved State and waits before its next
// input. Caller holds c.mu.
func (c *Coordinator) commitScale(name string, sc *scaled, outs []autoscale.Output, now time.Time) error {
	steps, persist := 0, sc.unsaved
	for _, o := range outs {
		steps += len(o.Steps)
		persist = persist || o.Persist
	}
	if !persist && steps == 0 {
		return nil
	}
	var rec *Topic
	if steps > 0 {
		r := c.topics[name]
		r.Brokers = slices.Clone(r.Brokers)
		for _, b := range sc.t.Brokers() {
			if i := slices.IndexFunc(r.Brokers, func(o Broker) bool { return o.Name == b.Name }); i >= 0 {
				r.Brokers[i].ReadQueues, r.Brokers[i].WriteQueues = b.Read, b.Write
			}
		}
		rec = &r
	}
	state := sc.t.State()
	if err := c.persistScaled(name, rec, &state, sc); err != nil {
		c.rollback(name, sc, now)
		sc.failures++
		sc.retryAt = now.Add(min(time.Second<<min(sc.failures-1, 10), c.opts.MaxRetry))
		c.as.m.failures.WithLabelValues(name).Inc()
		c.log.Error().Err(err).Str("topic", name).Int("steps", steps).Time("retryAt", sc.retryAt).
			Msg("autoscale: the store refused the change; the counts stay as they were")
		return storage(err, "saving the autoscale state of topic %q", name)
	}
	sc.saved, sc.failures, sc.retryAt = state, 0, time.Time{}
	if rec != nil {
		c.topics[name] = *rec
		// Every change goes through the recomputation of the groups consuming the topic. A
		// write count changes no assignment: the recomputation finds the inputs unchanged
		// and publishes nothing.
		c.topicChanged(name)
	}
	c.logScale(name, sc, outs)
	return nil
}

// rollback returns a scaler to its last saved State after the store refused a change. What it
// learnt since (members, confirmations, max offsets) comes back with the next heartbeats; the
// membership is fed again at the next Tick.
func (c *Coordinator) rollback(name string, sc *scaled, now time.Time) {
	t, err := autoscale.Restore(sc.saved)
	if err != nil {
		// sc.saved was produced by State, so this is a bug; keep going with what we have.
		c.log.Error().Err(err).Str("topic", name).Msg("autoscale: cannot go back to the saved state")
		return
	}
	sc.t = t
	sc.fed = map[string]fedKey{}
	for _, g := range sc.saved.Groups {
		sc.fed[g.Name] = fedKey{}
	}
}

// logScale logs and counts what inputs produced: one line per event, a step's line with the
// step's fields.
func (c *Coordinator) logScale(name string, sc *scaled, outs []autoscale.Output) {
	events := 0
	for _, o := range outs {
		i := 0
		for _, ev := range o.Events {
			events++
			var l *zerolog.Event
			switch ev.Kind {
			case autoscale.EventUnconfirmed, autoscale.EventNotDrained:
				l = c.log.Warn()
			default:
				l = c.log.Info()
			}
			l = l.Str("topic", name).Str("event", ev.Kind.String()).Uint64("plan", ev.Generation)
			if ev.Kind == autoscale.EventStep && i < len(o.Steps) {
				s := o.Steps[i]
				i++
				l = l.Str("broker", s.Broker).Str("kind", s.Kind.String()).Int("from", s.From).Int("to", s.To)
				dir := "up"
				if s.To < s.From {
					dir = "down"
				}
				c.as.m.steps.WithLabelValues(name, s.Kind.String(), dir).Inc()
			}
			c.as.m.events.WithLabelValues(name, ev.Kind.String()).Inc()
			l.Msg("autoscale " + ev.Kind.String() + ": " + ev.Message)
		}
	}
	if events > 0 {
		c.as.m.observe(name, sc.t.Status())
	}
}

// feed passes to the scaler the membership of every group of groups (those with a state for the
// topic) whose (group, topic) inputs changed since it was last fed, and forgets the groups
// that are gone. Caller holds c.mu.
func (c *Coordinator) feed(name string, sc *scaled, groups []*group, now time.Time) []autoscale.Output {
	var outs []autoscale.Output
	inGrace := now.Before(c.graceUntil)
	set := func(gname string, g *group, key fedKey, members []string) {
		model := autoscale.Clustering
		if g.cfg.Model == Broadcasting {
			model = autoscale.Broadcasting
		}
		out, err := sc.t.SetGroup(now, autoscale.Group{Name: gname, Model: model, Members: members})
		if err != nil { // member keys are unique and non-empty: a bug
			c.log.Error().Err(err).Str("topic", name).Str("group", gname).Msg("autoscale refused a membership")
			return
		}
		sc.fed[gname] = key
		delete(sc.restored, gname)
		outs = append(outs, out)
	}
	for _, g := range groups {
		gname, st := g.cfg.Name, g.topics[name]
		key := fedKey{g: g, seq: st.seq, model: g.cfg.Model}
		if k, ok := sc.fed[gname]; ok && k == key {
			continue
		}
		if inGrace && !allBack(g, sc.restored[gname]) {
			continue
		}
		ms := g.sortedMembers(name)
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.key
		}
		set(gname, g, key, ids)
	}
	for gname, k := range sc.fed {
		g := c.groups[gname]
		switch {
		case g == nil:
			outs = append(outs, sc.t.RemoveGroup(now, gname))
			delete(sc.fed, gname)
			delete(sc.restored, gname)
			delete(sc.gens, gname)
		case k.g != g && g.topics[name] == nil:
			// Restored from the store, or deleted and declared again, with no member
			// subscribed since: known, with no live members.
			if inGrace && k.g == nil {
				continue
			}
			set(gname, g, fedKey{g: g, model: g.cfg.Model}, nil)
		}
	}
	return outs
}

// allBack reports whether every restored member of a group is live again.
func allBack(g *group, restored []string) bool {
	for _, key := range restored {
		if g.keys[key] == nil {
			return false
		}
	}
	return true
}

// observe notes the layout covered by the generation in force of (g, topic name). It must run
// only where the scaler's layout and the groups' dirty marks agree: before an input, never
// between an input and its commit. Skipping it is always safe: a generation not noted only
// confirms later.
func (c *Coordinator) observe(name string, sc *scaled, g *group) {
	st := g.topics[name]
	if st == nil || st.gen == nil || st.dirty || st.computing {
		return
	}
	gl := sc.gens[g.cfg.Name]
	if gl == nil || gl.g != g {
		gl = &genLayouts{g: g}
		sc.gens[g.cfg.Name] = gl
	}
	n, layout := st.gen.Number, sc.t.Layout()
	if k := len(gl.list); k > 0 && gl.list[k-1].number >= n {
		if gl.list[k-1].number == n && gl.list[k-1].layout < layout {
			gl.list[k-1].layout = layout
		}
		return
	}
	gl.list = append(gl.list, genLayout{number: n, layout: layout})
	if len(gl.list) > maxGenLayouts {
		gl.list = slices.Delete(gl.list, 0, len(gl.list)-maxGenLayouts)
	}
}

// layoutOf is the layout a member of g that applied generation n has attached to; 0 when
// unknown.
func (sc *scaled) layoutOf(g *group, n int64) uint64 {
	gl := sc.gens[g.cfg.Name]
	if gl == nil || gl.g != g {
		return 0
	}
	var layout uint64
	for _, e := range gl.list {
		if e.number > n {
			break
		}
		layout = e.layout
	}
	return layout
}

// scaleTick feeds membership changes to every scaled topic and takes the steps that are due.
// It costs a map lookup per (group, topic) and a few per scaled topic when nothing changed:
// Tick runs after every membership change. Caller holds c.mu.
func (c *Coordinator) scaleTick(now time.Time) {
	if len(c.as.topics) == 0 {
		return
	}
	// First note what every generation covers, before any input moves a layout; then the
	// groups of each scaled topic.
	groups := map[string][]*group{}
	for _, g := range c.groups {
		for name := range g.topics {
			if sc := c.as.topics[name]; sc != nil {
				c.observe(name, sc, g)
				groups[name] = append(groups[name], g)
			}
		}
	}
	for name, sc := range c.as.topics {
		if !sc.retryAt.IsZero() {
			if now.Before(sc.retryAt) {
				continue
			}
			sc.retryAt = time.Time{} // the backoff is over; failures grows it until a success
		}
		outs := c.feed(name, sc, groups[name], now)
		if due, ok := sc.t.NextDeadline(); ok && !now.Before(due) {
			outs = append(outs, sc.t.Tick(now))
		}
		c.commitScale(name, sc, outs, now) // a failure is logged, and retried after its backoff
	}
}

// scaleDeadline is when scaleTick next has something to do; zero when nothing is pending.
func (c *Coordinator) scaleDeadline() time.Time {
	var next time.Time
	for _, sc := range c.as.topics {
		due, ok := sc.retryAt, !sc.retryAt.IsZero()
		if !ok {
			due, ok = sc.t.NextDeadline()
		}
		if ok && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}

// earliest returns the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// scaleHeartbeat passes what a member's heartbeat says to the scaled topics: the offsets of
// the queues it owns, and the generations it applied, as confirmations of the layouts they
// cover. Caller holds c.mu.
func (c *Coordinator) scaleHeartbeat(g *group, m *member, hb *Heartbeat, now time.Time) {
	if len(c.as.topics) == 0 {
		return
	}
	outs := map[string][]autoscale.Output{}
	scaledTopic := func(topic string) *scaled {
		sc := c.as.topics[topic]
		if sc == nil || now.Before(sc.retryAt) {
			return nil
		}
		if _, seen := outs[topic]; !seen {
			c.observe(topic, sc, g) // before the first input, for the confirmations below
			outs[topic] = nil
		}
		return sc
	}
	for _, topic := range slices.Sorted(maps.Keys(hb.Offsets)) {
		if sc := scaledTopic(topic); sc != nil {
			out, err := sc.t.ReportOffsets(now, g.cfg.Name, toAutoscale(hb.Offsets[topic]))
			if err != nil { // checked by Heartbeat.Check
				c.log.Warn().Err(err).Str("topic", topic).Str("group", g.cfg.Name).Msg("autoscale refused offsets")
				continue
			}
			outs[topic] = append(outs[topic], out)
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(hb.Generations)) {
		if _, ok := slices.BinarySearch(m.topics, topic); !ok {
			continue
		}
		sc := scaledTopic(topic)
		if sc == nil {
			continue
		}
		layout := sc.layoutOf(g, hb.Generations[topic])
		if layout == 0 {
			continue
		}
		out, err := sc.t.Confirm(now, g.cfg.Name, m.key, layout)
		if err != nil {
			c.log.Error().Err(err).Str("topic", topic).Str("group", g.cfg.Name).Msg("autoscale refused a confirmation")
			continue
		}
		outs[topic] = append(outs[topic], out)
	}
	for _, topic := range slices.Sorted(maps.Keys(outs)) {
		c.commitScale(topic, c.as.topics[topic], outs[topic], now) // a failure is logged
	}
}

// ReportOffsets records offsets of an auto-scaled topic's queues: a group's committed offsets
// (with the max offsets its members read), or, with no group, a broker's max offsets. It
// returns the topic's autoscale status after the report.
func (c *Coordinator) ReportOffsets(topic, group string, offsets []QueueOffset) (autoscale.Status, error) {
	if err := CheckName("topic", topic); err != nil {
		return autoscale.Status{}, err
	}
	if group != "" {
		if err := CheckName("group", group); err != nil {
			return autoscale.Status{}, err
		}
	}
	if err := checkOffsets("offsets", offsets); err != nil {
		return autoscale.Status{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[topic]; !ok {
		return autoscale.Status{}, notFound("topic %q not found", topic)
	}
	sc := c.as.topics[topic]
	if sc == nil {
		return autoscale.Status{}, conflict("topic %q has no autoscale policy; offsets are kept only for auto-scaled topics", topic)
	}
	now := c.clock.Now()
	out, err := sc.t.ReportOffsets(now, group, toAutoscale(offsets))
	if err != nil {
		return autoscale.Status{}, invalid("%v", err)
	}
	if err := c.commitScale(topic, sc, []autoscale.Output{out}, now); err != nil {
		return autoscale.Status{}, err
	}
	return sc.t.Status(), nil
}

// TopicView returns a topic with its autoscale status.
func (c *Coordinator) TopicView(name string) (TopicView, error) {
	if err := CheckName("topic", name); err != nil {
		return TopicView{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return TopicView{}, notFound("topic %q not found", name)
	}
	v := TopicView{Topic: t}
	if sc := c.as.topics[name]; sc != nil {
		s := sc.t.Status()
		v.Autoscaling = &s
	}
	return v, nil
}
