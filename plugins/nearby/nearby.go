// Package nearby reproduces RocketMQ's MACHINE_ROOM_NEARBY strategy (Java
// AllocateMachineRoomNearby) around an inner strategy: averagely (AVG), circle (AVG_BY_CIRCLE) or
// hash (CONSISTENT_HASH), whose packages do the splitting. Queues and consumers are grouped by
// machine room; a consumer gets the inner strategy's share of its own room's queues among its own
// room's consumers, then, for every room that has queues but no consumer, in Java's String.compareTo
// order of room names, its share of that room's queues among all consumers.
//
// Rooms come from the caller (in allocd, the label "zone" of each queue and consumer). A missing
// or empty room fails every member, naming the first bad queue, else the first bad consumer, as
// Java's IllegalArgumentException does; a room of spaces is a room.
//
// New and Group are pure computation: no I/O, no goroutines; a Group is not safe for concurrent
// use. Info and Prepare are the plugin (plugin.go), which plugins/nearby/wasm registers.
package nearby

import (
	"slices"
	"strconv"

	"github.com/allocd/allocd/plugins/averagely"
	"github.com/allocd/allocd/plugins/circle"
	"github.com/allocd/allocd/plugins/hash"
	"github.com/allocd/allocd/plugins/rocketmq"
)

// Inner is the strategy applied within each room.
type Inner struct {
	kind   int // innerAveragely, innerCircle, innerHash
	vnodes int
}

const (
	innerAveragely = iota
	innerCircle
	innerHash
)

// ParseInner reads the config values of "inner" and "vnodes": inner is averagely (the default,
// also for ""), circle or hash, or Java's names AVG, AVG_BY_CIRCLE and CONSISTENT_HASH; vnodes is
// read only for hash (hash.ParseVirtualNodes: default 10, as the inner of the vectors).
func ParseInner(inner, vnodes string) (Inner, error) {
	switch inner {
	case "", "averagely", rocketmq.StrategyAvg:
		return Inner{kind: innerAveragely}, nil
	case "circle", rocketmq.StrategyAvgByCircle:
		return Inner{kind: innerCircle}, nil
	case "hash", rocketmq.StrategyConsistentHash:
		v, err := hash.ParseVirtualNodes(vnodes)
		if err != nil {
			return Inner{}, err
		}
		return Inner{kind: innerHash, vnodes: v}, nil
	}
	return Inner{}, &rocketmq.ArgumentError{Msg: "nearby: config \"" + rocketmq.ConfigInner + "\" is " + strconv.Quote(inner) +
		"; want averagely, circle or hash"}
}

// Name is the inner strategy's plugin name.
func (in Inner) Name() string {
	return [...]string{"averagely", "circle", "hash"}[in.kind]
}

// Input is one group as the strategy sees it: n queues and c consumers in canonical order.
type Input struct {
	N, C int
	// Queue gives queue i, for the hash ring and for the error naming a queue without a room.
	Queue func(i int) (topic, brokerName string, queueID int32)
	// Consumer gives consumer j's id.
	Consumer func(j int) string
	// QueueRoom and ConsumerRoom give the room of queue i and consumer j; ok false is Java's null.
	QueueRoom    func(i int) (room string, ok bool)
	ConsumerRoom func(j int) (room string, ok bool)
}

// Group is a group resolved into rooms, ready to answer for each member.
type Group struct {
	in    Input
	inner Inner
	err   error // a queue or consumer without a room: every member's answer

	queues    [][]int // per room (in Java order), its queues in mqAll order
	consumers [][]int // per room, its consumers in cidAll order
	roomOf    []int   // per consumer, its room
	orphans   []int   // rooms with queues and no consumer, in Java order

	// hash only, built on first use: per room, the owner of each of its queues among that
	// room's consumers; and per orphan room, among all consumers.
	own, orphan [][]int
	all         *hash.Ring
}

// New resolves the rooms of in. It does not fail: a missing room makes every member's Allocate
// fail, as in Java, where the check runs after the arguments' own (rocketmq.Check) and only for
// members.
func New(in Input, inner Inner) *Group {
	g := &Group{in: in, inner: inner}
	ids := map[string]int{}
	var names []string
	room := func(r string) int {
		id, ok := ids[r]
		if !ok {
			id = len(names)
			ids[r] = id
			names = append(names, r)
		}
		return id
	}
	queueRoom := make([]int, in.N)
	for i := range queueRoom {
		r, ok := in.QueueRoom(i)
		if !ok || r == "" {
			t, b, q := in.Queue(i)
			g.err = &rocketmq.ArgumentError{Msg: "Machine room is null for mq " + rocketmq.QueueString(t, b, q)}
			return g
		}
		queueRoom[i] = room(r)
	}
	g.roomOf = make([]int, in.C)
	for j := range g.roomOf {
		r, ok := in.ConsumerRoom(j)
		if !ok || r == "" {
			g.err = &rocketmq.ArgumentError{Msg: "Machine room is null for consumer id " + in.Consumer(j)}
			return g
		}
		g.roomOf[j] = room(r)
	}
	// Number the rooms in Java's TreeMap order.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return rocketmq.CompareJava(names[a], names[b]) })
	rank := make([]int, len(names))
	for k, id := range order {
		rank[id] = k
	}
	g.queues = make([][]int, len(names))
	g.consumers = make([][]int, len(names))
	for i, id := range queueRoom {
		g.queues[rank[id]] = append(g.queues[rank[id]], i)
	}
	for j, id := range g.roomOf {
		g.roomOf[j] = rank[id]
		g.consumers[rank[id]] = append(g.consumers[rank[id]], j)
	}
	for r := range g.queues {
		if len(g.queues[r]) > 0 && len(g.consumers[r]) == 0 {
			g.orphans = append(g.orphans, r)
		}
	}
	return g
}

// Err is the error every member gets (a queue or consumer without a room), or nil.
func (g *Group) Err() error { return g.err }

// Allocate appends to dst, as indices into mqAll, what the member at index self (the first
// occurrence of its id in cidAll) gets: its share of its own room's queues among its room's
// consumers, then its share of each orphan room's queues among all consumers, in room order.
// Callers run rocketmq.Check first and answer non-members (self < 0) nothing themselves.
func (g *Group) Allocate(dst []int, self int) ([]int, error) {
	if g.err != nil {
		return dst, g.err
	}
	if self < 0 || self >= g.in.C {
		return dst, nil
	}
	r := g.roomOf[self]
	if qs := g.queues[r]; len(qs) > 0 {
		cs := g.consumers[r]
		at, _ := slices.BinarySearch(cs, self) // self is its id's first occurrence in the room too
		var err error
		if dst, err = g.share(dst, qs, len(cs), at, func() ([]int, error) { return g.ownOwners(r) }); err != nil {
			return dst, err
		}
	}
	for k, o := range g.orphans {
		var err error
		if dst, err = g.share(dst, g.queues[o], g.in.C, self, func() ([]int, error) { return g.orphanOwners(k) }); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// share appends the inner strategy's answer for the consumer at index at of c consumers over the
// queues qs (indices into mqAll); owners gives, for hash, the owner of each of qs.
func (g *Group) share(dst, qs []int, c, at int, owners func() ([]int, error)) ([]int, error) {
	switch g.inner.kind {
	case innerHash:
		os, err := owners()
		if err != nil {
			return dst, err
		}
		for k, o := range os {
			if o == at {
				dst = append(dst, qs[k])
			}
		}
		return dst, nil
	case innerCircle:
		start := len(dst)
		dst = circle.Allocate(dst, len(qs), c, at)
		return mapIndices(dst, start, qs), nil
	default:
		start := len(dst)
		dst = averagely.Allocate(dst, len(qs), c, at)
		return mapIndices(dst, start, qs), nil
	}
}

// mapIndices turns dst[start:], indices into qs, into the queues' own indices.
func mapIndices(dst []int, start int, qs []int) []int {
	for k := start; k < len(dst); k++ {
		dst[k] = qs[dst[k]]
	}
	return dst
}

func (g *Group) ownOwners(r int) ([]int, error) {
	if g.own == nil {
		g.own = make([][]int, len(g.queues))
	}
	if g.own[r] == nil {
		cs := g.consumers[r]
		ring, err := hash.NewRing(len(cs), func(k int) string { return g.in.Consumer(cs[k]) }, g.inner.vnodes)
		if err != nil {
			return nil, err
		}
		g.own[r] = g.assign(ring, g.queues[r])
	}
	return g.own[r], nil
}

func (g *Group) orphanOwners(k int) ([]int, error) {
	if g.orphan == nil {
		g.orphan = make([][]int, len(g.orphans))
	}
	if g.orphan[k] == nil {
		if g.all == nil {
			ring, err := hash.NewRing(g.in.C, g.in.Consumer, g.inner.vnodes)
			if err != nil {
				return nil, err
			}
			g.all = ring
		}
		g.orphan[k] = g.assign(g.all, g.queues[g.orphans[k]])
	}
	return g.orphan[k], nil
}

func (g *Group) assign(ring *hash.Ring, qs []int) []int {
	owners := make([]int, len(qs))
	ring.Assign(owners, len(qs), func(k int) (string, string, int32) { return g.in.Queue(qs[k]) })
	return owners
}
