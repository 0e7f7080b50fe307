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
	"unsafe"

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
	var m Memo
	return m.Assign(g, opt)
}

// Memo is Assign's storage kept from one call for the next, for a caller that assigns one group
// after another (the plugin: an instance serves one call at a time). It keeps the ring of the
// last call's members, which the next call takes back as it is when the members are the same,
// and derives when they changed by dropping the leavers' points, renumbering the others' and
// merging in the joiners', instead of hashing and sorting every point again; and the working
// slices, so that a call in a wasm guest allocates next to nothing. It holds one call's ring,
// ids and slices, so its memory is bounded by that call's size. The zero Memo is ready to use;
// a Memo is not for concurrent use. Its answers are Assign's without it (TestMemoUnchanged).
type Memo struct {
	// The ring of the last call that needed one, and what it was built from: ringIDs is that
	// call's cidAll (copies), ringNodes its virtual nodes per member.
	ring      ring
	ringIDs   []string
	ringNodes int
	hasRing   bool

	// One call's input, read from a Group or a View. cidAll is ids, or view's consumers when
	// view is set: in a wasm guest, storing strings in the heap costs a write barrier each, and
	// a guest's collector, which runs only inside calls, may stay in its mark phase across them.
	ids     []string
	view    *abi.View
	nids    int
	members []int32  // the index of the first occurrence of every id, ascending
	prev    []int32  // nil, or each queue's previous owner as an index into ids (-1: none or gone)
	qzones  []string // nil or parallel to the queues
	czones  []string // nil or parallel to ids
	index   map[string]int32
	indexed bool // index maps this call's ids to their first index

	// Working storage.
	qzoneBuf, czoneBuf        []string
	prevBuf, load, held       []int32
	shed, rest, remap, owners []int32
	kept                      []bool
	points, spare, fresh      []point
}

// Assign is the package's Assign, through m.
func (m *Memo) Assign(g *Group, opt Options) []int {
	n := len(g.Queues)
	m.ids, m.view, m.nids = g.Consumers, nil, len(g.Consumers)
	m.indexConsumers()
	m.members = m.members[:0]
	for j, id := range g.Consumers {
		if m.index[id] == int32(j) {
			m.members = append(m.members, int32(j))
		}
	}
	m.prev = nil
	if g.PrevOwners != nil {
		m.prevBuf = grow(m.prevBuf, n)
		for i, o := range g.PrevOwners {
			j, ok := m.index[o]
			if !ok || o == "" {
				j = -1
			}
			m.prevBuf[i] = j
		}
		m.prev = m.prevBuf
	}
	m.qzones, m.czones = g.QueueZones, g.ConsumerZones
	m.owners = grow(m.owners, n)
	var qh queueHasher
	m.assign(n, opt, func(i int) uint64 { return qh.hash(g.Queues[i]) }, m.owners)
	owners := make([]int, n)
	for i, o := range m.owners {
		owners[i] = int(o)
	}
	return owners
}

// AssignView is Assign on the group of request v, through m: it sets owners[i] (len(owners) ==
// v.NumQueues()) to the index in cidAll of the first occurrence of the id that owns queue i, or
// abi.NoOwner when the group has no consumers. It finds members and previous owners by string
// id rather than by string (ABI.md §4.4) and does not keep v's strings past the call.
func (m *Memo) AssignView(v *abi.View, opt Options, owners []int32) {
	n, c := v.NumQueues(), v.NumConsumers()
	m.ids, m.view, m.nids, m.indexed = nil, v, c, false
	m.members = m.members[:0]
	for j := range c {
		if v.ConsumerFirstIndex(j) == j {
			m.members = append(m.members, int32(j))
		}
	}
	m.prev = nil
	if v.HasPrevOwners() {
		m.prevBuf = grow(m.prevBuf, n)
		v.PrevOwnerIndices(m.prevBuf) // one call: a call per queue costs more than the lookup in a guest
		m.prev = m.prevBuf
	}
	m.qzones, m.czones = nil, nil
	if v.HasQueueAttrs() {
		m.qzoneBuf = slices.Grow(m.qzoneBuf[:0], n)[:n]
		for i := range n {
			m.qzoneBuf[i], _ = v.QueueLabel(i, ZoneLabel)
		}
		m.qzones = m.qzoneBuf
	}
	if v.HasConsumerAttrs() {
		m.czoneBuf = slices.Grow(m.czoneBuf[:0], c)[:c]
		for j := range c {
			m.czoneBuf[j], _ = v.ConsumerLabel(j, ZoneLabel)
		}
		m.czones = m.czoneBuf
	}
	var qh queueHasher
	m.assign(n, opt, func(i int) uint64 { return qh.hash(v.Queue(i)) }, owners)
	if m.qzones != nil { // the call's strings are not kept
		clear(m.qzoneBuf)
	}
	if m.czones != nil {
		clear(m.czoneBuf)
	}
	if m.indexed {
		clear(m.index)
		m.indexed = false
	}
	m.view = nil
}

// id returns consumer j's id.
func (m *Memo) id(j int) string {
	if m.view != nil {
		return m.view.Consumer(j)
	}
	return m.ids[j]
}

// sameIDs reports whether this call's cidAll is the one the ring was built from.
func (m *Memo) sameIDs() bool {
	if len(m.ringIDs) != m.nids {
		return false
	}
	for j, id := range m.ringIDs {
		if m.id(j) != id {
			return false
		}
	}
	return true
}

// indexConsumers maps cidAll to the index of each id's first occurrence.
func (m *Memo) indexConsumers() {
	if m.index == nil {
		m.index = make(map[string]int32, m.nids)
	} else {
		clear(m.index)
	}
	for j := range m.nids {
		id := m.id(j)
		if _, ok := m.index[id]; !ok {
			m.index[id] = int32(j)
		}
	}
	m.indexed = true
}

// grow returns s resized to n elements, its contents unspecified.
func grow(s []int32, n int) []int32 { return slices.Grow(s[:0], n)[:n] }

// zeros returns s resized to n zero elements.
func zeros(s []int32, n int) []int32 {
	s = grow(s, n)
	clear(s)
	return s
}

func (m *Memo) consumerZone(j int) string {
	if m.czones == nil {
		return ""
	}
	return m.czones[j]
}

// assign places the n queues of the input that m holds (ids, members, prev, zones), hash(i)
// being queue i's ring position, and writes every queue's owner into owners.
func (m *Memo) assign(n int, opt Options, hash func(i int) uint64, owners []int32) {
	if opt.Balance < 1 {
		opt.Balance = DefaultBalance
	}
	if opt.VirtualNodes < 1 {
		opt.VirtualNodes = DefaultVirtualNodes
	}
	c := m.nids
	if len(m.members) == 0 || n == 0 || c > MaxConsumers {
		for i := range owners {
			owners[i] = -1
		}
		return
	}
	bound := int32(Bound(n, len(m.members), opt.Balance))
	m.load, m.held = zeros(m.load, c), zeros(m.held, c)
	load, held := m.load, m.held // held: queues each member owned in the previous generation

	// Pass 1: keep queues with their previous owners, under the bound. Every queue's owner is
	// set here or placed below, so no pass of its own clears them; the kept queue, the usual
	// case, takes one test (in a Go guest each branch taken costs a trip through the function's
	// dispatch loop, BENCHMARKS.md).
	shed, rest := m.shed[:0], m.rest[:0]
	if m.prev == nil {
		for i := range n {
			owners[i] = -1
			rest = append(rest, int32(i))
		}
	} else {
		for i, j := range m.prev[:n] {
			if uint32(j) < uint32(c) && load[j] < bound {
				owners[i] = j
				load[j]++
				held[j]++
				continue
			}
			owners[i] = -1
			if j < 0 {
				rest = append(rest, int32(i))
			} else {
				held[j]++
				shed = append(shed, int32(i))
			}
		}
	}
	m.shed, m.rest = shed, rest
	if len(shed)+len(rest) == 0 {
		return
	}

	// The ring: VirtualNodes points per member, sorted by position (ties by member index).
	sorted := m.ringFor(opt.VirtualNodes)
	ring := sorted.points

	// Sub-rings: per zone, and the members that held nothing before (newcomers), each in ring
	// order. A sub-ring found full stays full: loads only grow and the bound is fixed.
	filter := func(sub []point, keep func(j int) bool) []point {
		for _, p := range ring {
			if keep(p.member()) {
				sub = append(sub, p)
			}
		}
		return sub
	}
	var zones []string
	var zoneRings map[string][]point
	if m.czones != nil && m.qzones != nil {
		for _, j := range m.members {
			if z := m.czones[j]; z != "" && !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
		slices.Sort(zones)
		zoneRings = make(map[string][]point, len(zones))
		for _, z := range zones {
			zoneRings[z] = filter(nil, func(j int) bool { return m.czones[j] == z })
		}
	}
	var zoneFull map[string]bool
	fresh := m.fresh[:0]
	if len(shed) > 0 {
		fresh = filter(fresh, func(j int) bool { return held[j] == 0 })
		m.fresh = fresh
	}
	freshFull := len(fresh) == 0

	// walk returns the member at or after hash h on sub whose load is under the bound and that
	// accept admits, or -1.
	walk := func(sub []point, h uint64, accept func(j int) bool) int32 {
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
					return int32(j)
				}
			}
		}
		return -1
	}
	place := func(i int32, wasShed bool) {
		h := hash(int(i))
		var z string
		if m.qzones != nil {
			z = m.qzones[i]
		}
		zoneRing, zoned := zoneRings[z]
		zoned = zoned && z != ""
		j := int32(-1)
		if wasShed && !freshFull {
			if zoned {
				j = walk(fresh, h, func(j int) bool { return m.consumerZone(j) == z })
			}
			if j < 0 {
				if j = walk(fresh, h, nil); j < 0 {
					freshFull = true
				}
			}
		}
		if j < 0 && zoned && !zoneFull[z] {
			if j = walk(zoneRing, h, nil); j < 0 {
				if zoneFull == nil {
					zoneFull = map[string]bool{}
				}
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
}

// ringFor returns the ring of the call's members with vnodes points each: the last call's when
// it was built from the same cidAll, derived from it when the members changed, else built.
func (m *Memo) ringFor(vnodes int) *ring {
	if m.hasRing && m.ringNodes == vnodes && m.sameIDs() {
		return &m.ring
	}
	if !m.hasRing || m.ringNodes != vnodes || !m.derive(vnodes) {
		pts := m.points[:0]
		for _, j := range m.members {
			pts = appendPoints(pts, m.id(int(j)), j, vnodes)
		}
		m.points = pts
		m.ring.build(pts)
	}
	m.ringIDs = m.cloneIDs(m.ringIDs[:0])
	m.ringNodes, m.hasRing = vnodes, true
	return &m.ring
}

// derive turns the last call's ring into this call's: the points of the members that stay,
// renumbered to their index in this cidAll, merged with the points of the members that joined.
// Both are sorted, so the merge is; it reports false (the ring is then built anew) when the
// renumbering put two points of the same position out of order, which needs two members whose
// order in cidAll changed to share a position's high 44 bits.
func (m *Memo) derive(vnodes int) bool {
	if !m.indexed {
		m.indexConsumers()
	}
	m.remap = grow(m.remap, len(m.ringIDs))
	m.kept = slices.Grow(m.kept[:0], m.nids)[:m.nids]
	clear(m.kept)
	for k, id := range m.ringIDs {
		j, ok := m.index[id]
		if !ok {
			j = -1
		} else {
			m.kept[j] = true
		}
		m.remap[k] = j
	}
	stay := m.spare[:0]
	var last point
	for _, p := range m.ring.points {
		j := m.remap[p.member()]
		if j < 0 {
			continue
		}
		q := newPoint(uint64(p), int(j))
		if q < last {
			m.spare = stay
			return false
		}
		last = q
		stay = append(stay, q)
	}
	m.spare = stay
	join := m.points[:0]
	for _, j := range m.members {
		if !m.kept[j] {
			join = appendPoints(join, m.id(int(j)), j, vnodes)
		}
	}
	slices.Sort(join)
	m.points = join
	// The old ring's storage is free now: the merge goes there.
	out := slices.Grow(m.ring.points[:0], len(stay)+len(join))
	a, b := 0, 0
	for a < len(stay) && b < len(join) {
		if join[b] < stay[a] {
			out = append(out, join[b])
			b++
		} else {
			out = append(out, stay[a])
			a++
		}
	}
	out = append(append(out, stay[a:]...), join[b:]...)
	m.ring.points = out
	m.ring.index()
	return true
}

// appendPoints appends the vnodes ring points of the member at index j with id id.
func appendPoints(dst []point, id string, j int32, vnodes int) []point {
	h := hashString(id)
	for v := 0; v < vnodes; v++ {
		dst = append(dst, newPoint(mix(h^(uint64(v)+1)*0x9e3779b97f4a7c15), int(j)))
	}
	return dst
}

// cloneIDs appends copies of cidAll's ids to dst, all in one new block of memory.
func (m *Memo) cloneIDs(dst []string) []string {
	size := 0
	for j := range m.nids {
		size += len(m.id(j))
	}
	block := make([]byte, 0, size)
	for j := range m.nids {
		id := m.id(j)
		start := len(block)
		block = append(block, id...)
		dst = append(dst, unsafe.String(unsafe.SliceData(block[start:]), len(id)))
	}
	return dst
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
	next   []int32
	shift  uint
}

// maxRingBits bounds the index at 2^16 buckets (256 KiB).
const maxRingBits = 16

// count sizes the index for n points and counts the points of each bucket.
func (r *ring) count(points []point) {
	bits := uint(1) // about two points a bucket
	for 2<<bits < len(points) && bits < maxRingBits {
		bits++
	}
	r.shift = 64 - bits
	r.starts = zeros(r.starts, 1<<bits+1)
	for _, p := range points {
		r.starts[uint64(p)>>r.shift+1]++
	}
	for b := 1; b < len(r.starts); b++ {
		r.starts[b] += r.starts[b-1]
	}
}

// index indexes r.points, which are sorted.
func (r *ring) index() { r.count(r.points) }

// build makes r the ring of points (which it does not keep).
func (r *ring) build(points []point) {
	r.count(points)
	r.next = append(r.next[:0], r.starts[:len(r.starts)-1]...)
	r.points = slices.Grow(r.points[:0], len(points))[:len(points)]
	for _, p := range points {
		b := uint64(p) >> r.shift
		r.points[r.next[b]] = p
		r.next[b]++
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

// A queueHasher is hashQueue for queues in mqAll order: the hash state after a queue's topic and
// broker carries over to the next queue of the same (topic, broker), so a queue costs four bytes
// of FNV and the finish.
type queueHasher struct {
	topic, broker string
	prefix        uint64
	ok            bool
}

func (q *queueHasher) hash(queue abi.Queue) uint64 {
	if !q.ok || queue.Topic != q.topic || queue.BrokerName != q.broker {
		h := fnvString(fnvOffset, queue.Topic)
		h = (h ^ 0) * fnvPrime
		h = fnvString(h, queue.BrokerName)
		q.topic, q.broker, q.prefix, q.ok = queue.Topic, queue.BrokerName, (h^0)*fnvPrime, true
	}
	h := q.prefix
	for k := 0; k < 4; k++ {
		h ^= uint64(byte(uint32(queue.QueueID) >> (8 * k)))
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
