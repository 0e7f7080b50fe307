package coordinator

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/model"
)

// Assignment is one member's view of its group: per topic, the generation in force and the
// member's queues in it (empty, never absent, for a topic it subscribes to).
type Assignment struct {
	Generations map[string]int64       `json:"generations"`
	Queues      map[string][]abi.Queue `json:"assignment"`
	// Lost: this heartbeat started a new session for a member whose previous one the daemon
	// ended (it expired, or was removed for not confirming a revocation): whatever it was told
	// before is no longer its own, and it must let go of every queue it held.
	Lost bool `json:"lost,omitempty"`
}

// Newer reports whether some topic's generation is newer than after.
func (a Assignment) Newer(after int64) bool {
	for _, n := range a.Generations {
		if n > after {
			return true
		}
	}
	return false
}

// Heartbeat records that a member is alive, joining it if new, and returns its assignment.
//
// A member with an instance id that another live member holds takes that member's place and
// queues (a restarted static member); the replaced client id is refused for one session
// timeout. Changes to the member's topics or labels are recomputed after the debounce window;
// a heartbeat that changes nothing only renews the session.
func (c *Coordinator) Heartbeat(groupName string, hb Heartbeat) (Assignment, error) {
	if err := CheckName("group", groupName); err != nil {
		return Assignment{}, err
	}
	if err := hb.Check(); err != nil {
		return Assignment{}, err
	}
	topics := slices.Clone(hb.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)

	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return Assignment{}, notFound("group %q not found (declare it with PUT /v1/groups/%s)", groupName, groupName)
	}
	now := c.clock.Now()
	if g.firstBeat.IsZero() {
		g.firstBeat = now
	}
	if f, ok := g.fenced[hb.CID]; ok {
		if now.Sub(f.at) < c.opts.SessionTimeout && f.reason != "" {
			return Assignment{}, conflict("client id %q was removed from group %q: %s; it may join again after %s", hb.CID, groupName, f.reason, f.at.Add(c.opts.SessionTimeout).UTC().Format(time.RFC3339))
		}
		if now.Sub(f.at) < c.opts.SessionTimeout {
			return Assignment{}, conflict("client id %q was replaced by %q, which holds instance id %q", hb.CID, f.by, hb.InstanceID)
		}
		delete(g.fenced, hb.CID)
	}
	if err := c.checkPending(g, topics); err != nil {
		return Assignment{}, err
	}
	m := g.members[hb.CID]
	if m != nil && m.instance != hb.InstanceID {
		// The same client id under another instance id: a different member now.
		c.depart(g, m, model.ReleaseLeft, now)
		m = nil
	}
	lost := m == nil && g.lostSession(hb)
	if m == nil {
		var err error
		if m, err = c.join(g, hb, topics, now); err != nil {
			return Assignment{}, err
		}
	} else {
		c.update(g, m, topics, hb.Labels, now)
	}
	m.lastSeen = now
	m.confirms = m.confirms || hb.Confirms || len(hb.Generations) > 0
	if len(hb.Generations) > 0 || len(m.applied) > 0 {
		m.applied = maps.Clone(hb.Generations)
		c.confirmApplied(g, m)
	}
	c.scaleHeartbeat(g, m, &hb, now)
	recordLag(g, m, hb.Offsets, now)
	a := c.view(g, m.key, m.topics)
	a.Lost = lost
	return a, nil
}

func newMember(hb Heartbeat, topics []string, now time.Time) *member {
	m := &member{cid: hb.CID, instance: hb.InstanceID, key: hb.CID, topics: topics, lastSeen: now}
	if hb.InstanceID != "" {
		m.key = hb.InstanceID
	}
	m.setLabels(hb.Labels)
	return m
}

func (m *member) setLabels(labels map[string]string) {
	m.labels = maps.Clone(labels)
	if m.labels == nil {
		m.labels = map[string]string{}
	}
	m.weight, m.hasWeight = 0, false
	if v, ok := labels[WeightLabel]; ok {
		m.weight, _ = parseWeight(v) // checked by Heartbeat.Check
		m.hasWeight = true
	}
}

// join adds a member, or lets a restarted static member take its predecessor's place.
func (c *Coordinator) join(g *group, hb Heartbeat, topics []string, now time.Time) (*member, error) {
	m := newMember(hb, topics, now)
	if other := g.keys[m.key]; other != nil {
		if other.instance == "" || other.instance != m.instance {
			return nil, conflict("member key %q of client id %q is already used by client id %q (an instance id must not equal another member's client id)", m.key, m.cid, other.cid)
		}
		// A restarted static member: it takes the key, hence the queues, with no new
		// generation. Only what differs from its predecessor is recomputed.
		g.deleteMember(other)
		c.locksMemberGone(g.cfg.Name, other.cid, now)
		g.fenced[other.cid] = fence{by: m.cid, at: now}
		g.addMember(m)
		g.keys[m.key] = m
		c.renameKey(g, m.key, m.cid)
		changed := symmetricDiff(other.topics, m.topics)
		if !maps.Equal(other.labels, m.labels) {
			changed = append(changed, m.topics...)
		}
		c.touch(g, now, changed...)
		c.dropPending(g, changed)
		c.log.Info().Str("group", g.cfg.Name).Str("cid", m.cid).Str("instanceId", m.instance).
			Str("replaced", other.cid).Msg("static member restarted")
		return m, nil
	}
	g.addMember(m)
	g.keys[m.key] = m
	delete(g.departed, m.key)
	// After a restart the persisted generation may already hold this key under another client
	// id (a static member that came back with a new one).
	c.renameKey(g, m.key, m.cid)
	c.touch(g, now, m.topics...)
	c.m.members.WithLabelValues(g.cfg.Name).Set(float64(len(g.members)))
	c.log.Debug().Str("group", g.cfg.Name).Str("cid", m.cid).Str("instanceId", m.instance).
		Strs("topics", m.topics).Msg("member joined")
	return m, nil
}

// renameKey records that key is now held by cid in every generation that assigns it.
func (c *Coordinator) renameKey(g *group, key, cid string) {
	for _, st := range g.topics {
		if st.gen == nil {
			continue
		}
		if _, ok := st.gen.Assignment[key]; ok && st.gen.CIDs[key] != cid {
			st.gen.CIDs[key] = cid
			st.persist = true
			st.owners = nil // by client id: stale
		}
	}
}

func (c *Coordinator) update(g *group, m *member, topics []string, labels map[string]string, now time.Time) {
	changed := symmetricDiff(m.topics, topics)
	m.topics = topics
	if !maps.Equal(m.labels, labels) {
		m.setLabels(labels)
		changed = append(changed, topics...)
	}
	c.touch(g, now, changed...)
	c.dropPending(g, changed)
}

// Leave removes a member at once, and reports whether it was there.
func (c *Coordinator) Leave(groupName, cid string) (bool, error) {
	if err := CheckName("group", groupName); err != nil {
		return false, err
	}
	if err := CheckID("cid", cid); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return false, notFound("group %q not found", groupName)
	}
	m := g.members[cid]
	if m == nil {
		return false, nil
	}
	c.depart(g, m, model.ReleaseLeft, c.clock.Now())
	c.log.Debug().Str("group", groupName).Str("cid", cid).Msg("member left")
	return true, nil
}

func (c *Coordinator) removeMember(g *group, m *member, now time.Time) {
	g.deleteMember(m)
	c.locksMemberGone(g.cfg.Name, m.cid, now)
	if g.keys[m.key] == m {
		delete(g.keys, m.key)
		c.dropHolds(g, m.key, g.departReason(m.key))
	}
	c.touch(g, now, m.topics...)
	c.dropPending(g, m.topics)
	c.m.members.WithLabelValues(g.cfg.Name).Set(float64(len(g.members)))
}

// Poll returns a member's assignment for topics (nil: the topics it subscribes to), and a
// channel closed when one of the group's generations changes or the group is deleted; a waiter
// should also watch Done. Unlike Heartbeat it does not renew the member's session.
func (c *Coordinator) Poll(groupName, cid string, topics []string) (Assignment, <-chan struct{}, error) {
	if err := CheckName("group", groupName); err != nil {
		return Assignment{}, nil, err
	}
	if err := CheckID("cid", cid); err != nil {
		return Assignment{}, nil, err
	}
	for _, t := range topics {
		if err := CheckName("topic", t); err != nil {
			return Assignment{}, nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.groups[groupName]
	if !ok {
		return Assignment{}, nil, notFound("group %q not found", groupName)
	}
	m := g.members[cid]
	if m == nil {
		return Assignment{}, nil, notFound("member %q of group %q not found (send a heartbeat first)", cid, groupName)
	}
	if topics == nil {
		topics = m.topics
	}
	return c.view(g, m.key, topics), g.changed, nil
}

func (c *Coordinator) view(g *group, key string, topics []string) Assignment {
	a := Assignment{Generations: make(map[string]int64, len(topics)), Queues: make(map[string][]abi.Queue, len(topics))}
	for _, t := range topics {
		var n int64
		qs := []abi.Queue{}
		if st := g.topics[t]; st != nil && st.gen != nil {
			n = st.gen.Number
			if got := st.gen.Assignment[key]; got != nil {
				qs = got
			}
		}
		a.Generations[t] = n
		a.Queues[t] = qs
	}
	return a
}

// expire drops members whose session ran out, and forgets old fences.
func (c *Coordinator) expire(now time.Time) {
	for _, g := range c.groups {
		for _, m := range g.members {
			if now.Sub(m.lastSeen) >= c.opts.SessionTimeout {
				c.depart(g, m, model.ReleaseExpired, now)
				c.m.expired.WithLabelValues(g.cfg.Name).Inc()
				c.log.Info().Str("group", g.cfg.Name).Str("cid", m.cid).Time("lastHeartbeat", m.lastSeen).
					Msg("member expired: no heartbeat within the session timeout")
			}
		}
		for cid, f := range g.fenced {
			if now.Sub(f.at) >= c.opts.SessionTimeout {
				delete(g.fenced, cid)
			}
		}
	}
}

// symmetricDiff returns the elements of two sorted lists that are in only one of them.
func symmetricDiff(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return out
}

// sortedMembers returns the live members subscribed to topic, by key.
func (g *group) sortedMembers(topic string) []*member {
	ms := make([]*member, 0, len(g.byKey))
	for _, m := range g.byKey {
		if _, ok := slices.BinarySearch(m.topics, topic); ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// addMember adds m to members and to byKey at its key's place (before members of an equal
// key, which live members never share).
func (g *group) addMember(m *member) {
	g.members[m.cid] = m
	i, _ := slices.BinarySearchFunc(g.byKey, m.key, compareKey)
	g.byKey = slices.Insert(g.byKey, i, m)
}

// deleteMember removes m from members and byKey.
func (g *group) deleteMember(m *member) {
	delete(g.members, m.cid)
	i, _ := slices.BinarySearchFunc(g.byKey, m.key, compareKey)
	for ; i < len(g.byKey) && g.byKey[i].key == m.key; i++ {
		if g.byKey[i] == m {
			g.byKey = slices.Delete(g.byKey, i, i+1)
			return
		}
	}
}

// compareKey orders a member against a key, for binary searches of byKey.
func compareKey(x *member, key string) int { return strings.Compare(x.key, key) }
