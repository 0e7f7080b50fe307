// Package sticky is consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam,
// "Consistent Hashing with Bounded Loads", SODA 2018) made sticky: the strategy of the sticky
// plugin, and the example of what ABI v1's extra fields (previous owners, zone labels, config)
// are for.
//
// Every member of the group may own at most B = ceil(c x n / m) of the n queues (m distinct
// members, c the "balance" setting, default 1.25). Assign places queues in two passes:
//
//  1. Keep: a queue whose previous owner is still a member stays with it while that owner holds
//     fewer than B queues (queues are visited in mqAll order, so an owner over the bound keeps
//     its first B and sheds the rest).
//  2. Place: every other queue walks the hash ring clockwise from its own hash to the first
//     member under the bound. A queue shed by a member over the bound tries the members that
//     held nothing before first (a newcomer), so a join moves no queue between two members that
//     stay unless the bound forces it. A queue carrying a "zone" label tries the members of that
//     zone before the others.
//
// A member joining or leaving therefore moves only the queues it must: on a leave, the leaver's
// queues; on a join, the queues that the lower bound takes from members at the old bound. The
// price is balance: loads stay within [0, B], not within one of each other.
//
// The package is pure computation, deterministic (no maps are iterated), and compiles for wasip1.
package sticky

import (
	"math"
	"slices"
	"strconv"

	"github.com/allocd/allocd/abi"
)

// Defaults of the configuration keys "balance" and "vnodes".
const (
	DefaultBalance      = 1.25
	DefaultVirtualNodes = 40
	// MaxVirtualNodes bounds "vnodes" so a ring stays small enough to build on every call.
	MaxVirtualNodes = 1000
)

// ZoneLabel is the label key that Assign matches between queues and consumers.
const ZoneLabel = "zone"

// Options are the strategy's settings.
type Options struct {
	// Balance is c: no member gets more than ceil(c x average) queues. At least 1.
	Balance float64
	// VirtualNodes is the number of ring points per member.
	VirtualNodes int
}

// Error is a configuration error.
type Error struct{ msg string }

func (e *Error) Error() string { return "sticky: " + e.msg }

// ParseOptions reads the config values of "balance" and "vnodes"; "" means the default.
func ParseOptions(balance, vnodes string) (Options, error) {
	o := Options{Balance: DefaultBalance, VirtualNodes: DefaultVirtualNodes}
	if balance != "" {
		c, err := strconv.ParseFloat(balance, 64)
		if err != nil || math.IsNaN(c) || math.IsInf(c, 0) || c < 1 {
			return o, &Error{"config \"balance\" = " + strconv.Quote(balance) + ": want a number >= 1 (the load bound is ceil(balance x average))"}
		}
		o.Balance = c
	}
	if vnodes != "" {
		v, err := strconv.Atoi(vnodes)
		if err != nil || v < 1 || v > MaxVirtualNodes {
			return o, &Error{"config \"vnodes\" = " + strconv.Quote(vnodes) + ": want an integer in [1, " + strconv.Itoa(MaxVirtualNodes) + "]"}
		}
		o.VirtualNodes = v
	}
	return o, nil
}

// Bound is the most queues one of m members may own: ceil(balance x n / m), and never less than
// ceil(n / m), so the members can always hold every queue.
func Bound(n, m int, balance float64) int {
	if m <= 0 {
		return 0
	}
	// The small epsilon keeps 1.1 x 10 / 1 = 11.000000000000002 from rounding up to 12.
	b := int(math.Ceil(balance*float64(n)/float64(m) - 1e-9))
	if least := (n + m - 1) / m; b < least {
		b = least
	}
	return b
}

// Group is the input of Assign: one consumer group in canonical order.
type Group struct {
	Queues []abi.Queue
	// QueueZones is nil or parallel to Queues: each queue's zone, "" for none.
	QueueZones []string
	// PrevOwners is nil or parallel to Queues: each queue's owner in the previous generation,
	// "" for none.
	PrevOwners []string
	// Consumers is cidAll. A repeated id is one member, at its first index.
	Consumers []string
	// ConsumerZones is nil or parallel to Consumers.
	ConsumerZones []string
}

// FromView reads a Group out of a request. Its strings alias the request's bytes.
func FromView(v *abi.View) *Group {
	n, c := v.NumQueues(), v.NumConsumers()
	g := &Group{Queues: make([]abi.Queue, n), Consumers: make([]string, c)}
	for i := range g.Queues {
		g.Queues[i] = v.Queue(i)
	}
	for j := range g.Consumers {
		g.Consumers[j] = v.Consumer(j)
	}
	if v.HasQueueAttrs() {
		g.QueueZones = make([]string, n)
		for i := range g.QueueZones {
			g.QueueZones[i], _ = v.QueueLabel(i, ZoneLabel)
		}
	}
	if v.HasConsumerAttrs() {
		g.ConsumerZones = make([]string, c)
		for j := range g.ConsumerZones {
			g.ConsumerZones[j], _ = v.ConsumerLabel(j, ZoneLabel)
		}
	}
	for i := 0; i < n; i++ {
		if o, ok := v.PrevOwner(i); ok {
			if g.PrevOwners == nil {
				g.PrevOwners = make([]string, n)
			}
			g.PrevOwners[i] = o
		}
	}
	return g
}

// FromRequest reads a Group out of a decoded request (whose lists are in canonical order).
func FromRequest(r *abi.Request) *Group {
	g := &Group{Queues: r.Queues, Consumers: r.Consumers, PrevOwners: r.PrevOwners}
	if r.QueueAttrs != nil {
		g.QueueZones = make([]string, len(r.Queues))
		for i, a := range r.QueueAttrs {
			g.QueueZones[i] = a.Labels[ZoneLabel]
		}
	}
	if r.ConsumerAttrs != nil {
		g.ConsumerZones = make([]string, len(r.Consumers))
		for j, a := range r.ConsumerAttrs {
			g.ConsumerZones[j] = a.Labels[ZoneLabel]
		}
	}
	return g
}

func (g *Group) queueZone(i int) string {
	if g.QueueZones == nil {
		return ""
	}
	return g.QueueZones[i]
}

func (g *Group) consumerZone(j int) string {
	if g.ConsumerZones == nil {
		return ""
	}
	return g.ConsumerZones[j]
}

// A ring point packs a virtual node's position (the high bits of its hash) and the index of its
// consumer (the low memberBits), so the ring sorts as plain integers and equal positions order by
// consumer index.
const memberBits = 20

type point uint64

func newPoint(hash uint64, member int) point {
	return point(hash&^(1<<memberBits-1) | uint64(member))
}

func (p point) member() int { return int(p & (1<<memberBits - 1)) }

// MaxConsumers is the largest cidAll Assign accepts; larger groups get no owners.
const MaxConsumers = 1 << memberBits

// Assign returns the owner of every queue: owners[i] is the index in g.Consumers of the first
// occurrence of the owning id, or -1 when the group has no consumers.
func Assign(g *Group, opt Options) []int {
	if opt.Balance < 1 {
		opt.Balance = DefaultBalance
	}
	if opt.VirtualNodes < 1 {
		opt.VirtualNodes = DefaultVirtualNodes
	}
	n := len(g.Queues)
	owners := make([]int, n)
	for i := range owners {
		owners[i] = -1
	}
	// Members: the first occurrence of every id.
	index := make(map[string]int, len(g.Consumers))
	var members []int
	for j, id := range g.Consumers {
		if _, ok := index[id]; !ok {
			index[id] = j
			members = append(members, j)
		}
	}
	if len(members) == 0 || n == 0 || len(g.Consumers) > MaxConsumers {
		return owners
	}
	bound := Bound(n, len(members), opt.Balance)
	load := make([]int, len(g.Consumers))
	held := make([]int, len(g.Consumers)) // queues each member owned in the previous generation

	// Pass 1: keep queues with their previous owners, under the bound.
	var shed, rest []int
	for i := 0; i < n; i++ {
		j := -1
		if g.PrevOwners != nil && g.PrevOwners[i] != "" {
			if k, ok := index[g.PrevOwners[i]]; ok {
				j = k
			}
		}
		switch {
		case j < 0:
			rest = append(rest, i)
		case load[j] < bound:
			owners[i] = j
			load[j]++
			held[j]++
		default:
			held[j]++
			shed = append(shed, i)
		}
	}
	if len(shed)+len(rest) == 0 {
		return owners
	}

	// The ring: VirtualNodes points per member, sorted by position (ties by member index).
	ring := make([]point, 0, len(members)*opt.VirtualNodes)
	for _, j := range members {
		h := hashString(g.Consumers[j])
		for v := 0; v < opt.VirtualNodes; v++ {
			ring = append(ring, newPoint(mix(h^(uint64(v)+1)*0x9e3779b97f4a7c15), j))
		}
	}
	sorted := newRing(ring)
	ring = sorted.points

	// Sub-rings: per zone, and the members that held nothing before (newcomers), each in ring
	// order. A sub-ring found full stays full: loads only grow and the bound is fixed.
	filter := func(keep func(j int) bool) []point {
		var sub []point
		for _, p := range ring {
			if keep(p.member()) {
				sub = append(sub, p)
			}
		}
		return sub
	}
	var zones []string
	zoneRings := map[string][]point{}
	if g.ConsumerZones != nil && g.QueueZones != nil {
		for _, j := range members {
			if z := g.consumerZone(j); z != "" && !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
		slices.Sort(zones)
		for _, z := range zones {
			zoneRings[z] = filter(func(j int) bool { return g.consumerZone(j) == z })
		}
	}
	zoneFull := map[string]bool{}
	var fresh []point
	if len(shed) > 0 {
		fresh = filter(func(j int) bool { return held[j] == 0 })
	}
	freshFull := len(fresh) == 0

	// walk returns the member at or after hash h on sub whose load is under the bound and that
	// accept admits, or -1.
	walk := func(sub []point, h uint64, accept func(j int) bool) int {
		var start int
		if len(sub) == len(ring) {
			start = sorted.search(h) // sub is the whole ring (a filter that kept every point)
		} else {
			start, _ = slices.BinarySearch(sub, point(h))
		}
		// From start to the end, then from the beginning to start: the ring's order, without
		// a division per step.
		for _, part := range [2][]point{sub[start:], sub[:start]} {
			for _, p := range part {
				j := p.member()
				if load[j] < bound && (accept == nil || accept(j)) {
					return j
				}
			}
		}
		return -1
	}
	place := func(i int, wasShed bool) {
		h := hashQueue(g.Queues[i])
		z := g.queueZone(i)
		zoneRing, zoned := zoneRings[z]
		zoned = zoned && z != ""
		j := -1
		if wasShed && !freshFull {
			if zoned {
				j = walk(fresh, h, func(j int) bool { return g.consumerZone(j) == z })
			}
			if j < 0 {
				if j = walk(fresh, h, nil); j < 0 {
					freshFull = true
				}
			}
		}
		if j < 0 && zoned && !zoneFull[z] {
			if j = walk(zoneRing, h, nil); j < 0 {
				zoneFull[z] = true
			}
		}
		if j < 0 {
			j = walk(ring, h, nil) // never -1: the members can hold every queue
		}
		owners[i] = j
		load[j]++
	}
	for _, i := range shed {
		place(i, true)
	}
	for _, i := range rest {
		place(i, false)
	}
	return owners
}

// A ring is the sorted points with an index by the top bits of a position: the points of
// bucket b, positions in [b<<shift, (b+1)<<shift), are points[starts[b]:starts[b+1]]. It is
// built by a counting pass over the buckets and a sort of each bucket (usually of zero to two
// points), which orders the points exactly as slices.Sort does, and a search starts from the
// bucket instead of bisecting the whole ring. On 1,024 queues and 64 members the comparison
// sort and the bisections were half of Assign's instructions (RATIONALE.md).
type ring struct {
	points []point
	starts []int32
	shift  uint
}

// maxRingBits bounds the index at 2^16 buckets (256 KiB).
const maxRingBits = 16

func newRing(points []point) *ring {
	bits := uint(1) // about two points a bucket
	for 2<<bits < len(points) && bits < maxRingBits {
		bits++
	}
	r := &ring{starts: make([]int32, 1<<bits+1), shift: 64 - bits}
	for _, p := range points {
		r.starts[uint64(p)>>r.shift+1]++
	}
	for b := 1; b < len(r.starts); b++ {
		r.starts[b] += r.starts[b-1]
	}
	next := slices.Clone(r.starts[:len(r.starts)-1])
	r.points = make([]point, len(points))
	for _, p := range points {
		b := uint64(p) >> r.shift
		r.points[next[b]] = p
		next[b]++
	}
	lo := int32(0)
	for _, hi := range r.starts[1:] {
		switch n := hi - lo; {
		case n == 2:
			if b := r.points[lo : lo+2]; b[1] < b[0] {
				b[0], b[1] = b[1], b[0]
			}
		case n > 2:
			slices.Sort(r.points[lo:hi])
		}
		lo = hi
	}
	return r
}

// search returns the index of the first point at or after position h, len(points) for none:
// slices.BinarySearch(points, point(h)), from h's bucket.
func (r *ring) search(h uint64) int {
	b := h >> r.shift
	i, end := int(r.starts[b]), int(r.starts[b+1])
	for i < end && r.points[i] < point(h) {
		i++
	}
	return i
}

// Buckets groups queue indices by owner: the queues of consumer j are
// byOwner[starts[j]:starts[j+1]], in mqAll order.
func Buckets(owners []int, consumers int) (starts, byOwner []int) {
	starts = make([]int, consumers+1)
	for _, o := range owners {
		if o >= 0 {
			starts[o+1]++
		}
	}
	for j := range consumers {
		starts[j+1] += starts[j]
	}
	byOwner = make([]int, starts[consumers])
	next := append([]int(nil), starts[:consumers]...)
	for i, o := range owners {
		if o >= 0 {
			byOwner[next[o]] = i
			next[o]++
		}
	}
	return starts, byOwner
}

// FNV-1a, finished with MurmurHash3's fmix64 so that nearby keys spread over the whole ring.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func hashString(s string) uint64 { return mix(fnvString(fnvOffset, s)) }

func hashQueue(q abi.Queue) uint64 {
	h := fnvString(fnvOffset, q.Topic)
	h = (h ^ 0) * fnvPrime
	h = fnvString(h, q.BrokerName)
	h = (h ^ 0) * fnvPrime
	for k := 0; k < 4; k++ {
		h ^= uint64(byte(uint32(q.QueueID) >> (8 * k)))
		h *= fnvPrime
	}
	return mix(h)
}

func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
