// Package hash reproduces RocketMQ's CONSISTENT_HASH strategy (Java
// AllocateMessageQueueConsistentHash with its default MD5 ConsistentHashRouter): every consumer
// puts V virtual nodes "cid-0" ... "cid-(V-1)" on a ring of unsigned 32-bit MD5 prefixes, and a
// queue belongs to the first ring entry at or after the hash of its MessageQueue.toString().
//
// Java rebuilds the ring on every allocate call and filters mqAll for the caller; here a Ring is
// built once and Assign gives every queue its owner in one pass, which serves the whole group.
// The package is pure computation: no I/O, no goroutines, no state kept between rings.
package hash

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"unsafe"

	"github.com/allocd/allocd/plugins/rocketmq"
)

// DefaultVirtualNodes is the virtual-node count of Java's no-argument constructor.
const DefaultVirtualNodes = 10

// maxEntries bounds c*V. Java holds the ring in a TreeMap of int-indexed size and would run out of
// memory far earlier; refusing here turns that into an error instead of a dead plugin.
const maxEntries = math.MaxInt32

// ParseVirtualNodes reads the config value of key "vnodes": "" means DefaultVirtualNodes. A value
// that is not a decimal integer in Java's int range is an error naming the value; a negative one is
// an *rocketmq.ArgumentError with Java's message "illegal virtualNodeCnt :<n>". 0 is accepted (and
// gives nobody any queue), as in Java.
func ParseVirtualNodes(s string) (int, error) {
	if s == "" {
		return DefaultVirtualNodes, nil
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, errors.New("hash: vnodes " + strconv.Quote(s) + " is not an integer in [0, 2147483647]")
	}
	if v < 0 {
		return 0, illegalVnodes(int(v))
	}
	return int(v), nil
}

func illegalVnodes(v int) error {
	return &rocketmq.ArgumentError{Msg: "illegal virtualNodeCnt :" + strconv.Itoa(v)}
}

// Hash is the ring's hash: first 4 bytes of MD5(UTF-8 key), big-endian unsigned (Java's MD5Hash,
// whose long result is always in 0..2^32-1). In a wasm guest it is md5Prefix, natively crypto/md5.
//
// Example: Hash([]byte("10.0.3.7@12345-0")) == 1811655797.
func Hash(key []byte) uint32 {
	if wasm {
		return md5Prefix(key)
	}
	sum := md5.Sum(key)
	return binary.BigEndian.Uint32(sum[:4])
}

// wasm: this is a wasm guest, where crypto/md5 has no assembly (md5.go).
const wasm = runtime.GOARCH == "wasm"

// prefixHashing is whether a Ring hashes its keys with prefixMD5 (a prefix's whole blocks once)
// rather than crypto/md5 over each whole key: in a wasm guest it is cheaper, natively it is not
// (RATIONALE.md). A variable, so that the tests run the guest's way natively too.
var prefixHashing = wasm

// Ring is a built consistent-hash ring. The zero Ring is empty: Owner returns -1.
//
// A Ring reuses one scratch buffer for its keys, so Owner and Assign are not safe for concurrent
// use; build one Ring per goroutine (or guard it).
type Ring struct {
	hashes []uint32 // ascending, distinct
	nodes  []int32  // nodes[i] owns hashes[i]: the first consumer index carrying that id
	// buckets index the ring by the top bits of a hash: the entries of bucket b, hashes in
	// [b<<shift, (b+1)<<shift), are hashes[buckets[b]:buckets[b+1]]. A lookup searches one
	// bucket, usually of zero to two entries, instead of the whole ring.
	buckets []int32
	shift   uint
	scratch []byte
	ids     []int32 // AssignOwnerRuns's buffer of a run's queue ids
	// assignRun's buffers: a run's hashes (also appendVnodeHashes's), and the places, ids and
	// hashes of the queues it hashes when the memo knows others; seq is 0, 1, 2...: a
	// consumer's virtual node indices.
	hs, vs, mh []uint32
	miss       []int32
	seq        []uint32
	memo       *Memo
	pm         prefixMD5 // in a wasm guest, the hashes of keys sharing the prefix last reset (md5.go)
}

// NewRing builds the ring exactly as Java does for consumers 0..c-1, consumer(i) giving the id of
// consumer i, in the given order (Java's order is cidAll's, sorted by the caller; unsorted input is
// used as given). consumer is called once per index.
//
// For each consumer in order, with e the number of ring entries that currently belong to its id
// (0 unless the id repeats), keys "id-e" ... "id-(e+V-1)" are put; an equal hash overwrites, so the
// later put wins and e counts only surviving entries. A repeated id therefore gets extra weight.
//
// vnodes<0 is an *rocketmq.ArgumentError with Java's message; vnodes==0 gives an empty ring. More
// than 2^31-1 consumers or ring entries (c*vnodes) is an error.
func NewRing(c int, consumer func(int) string, vnodes int) (*Ring, error) {
	return buildRing(c, consumer, vnodes, nil)
}

// NewRingMemo is NewRing taking the MD5 hashes of virtual nodes, and later Assign's hashes of
// queue keys, from m where it has them, and keeping the new ones there: the ring and answers are
// exactly NewRing's. The ids consumer gives must not change afterwards (m keeps them). m is not
// safe for concurrent use.
func NewRingMemo(c int, consumer func(int) string, vnodes int, m *Memo) (*Ring, error) {
	return buildRing(c, consumer, vnodes, m)
}

// NewRingMemoIDs is NewRingMemo for ids already in a slice, consumer i being ids[i]: a caller
// that holds them (abi.View.Consumers reads them in one call) spares a call of consumer for each.
// m keeps ids: neither the slice nor its strings may change afterwards.
func NewRingMemoIDs(ids []string, vnodes int, m *Memo) (*Ring, error) {
	if err := checkRingSize(len(ids), vnodes); err != nil {
		return nil, err
	}
	return ringOf(ids, vnodes, m), nil
}

func buildRing(c int, consumer func(int) string, vnodes int, m *Memo) (*Ring, error) {
	c = max(c, 0)
	if err := checkRingSize(c, vnodes); err != nil {
		return nil, err
	}
	var ids []string
	if vnodes > 0 {
		ids = make([]string, c)
		for i := range ids {
			ids[i] = consumer(i)
		}
	}
	return ringOf(ids, vnodes, m), nil
}

// checkRingSize refuses a negative vnodes (Java's message) and a ring too large to index.
func checkRingSize(c, vnodes int) error {
	if vnodes < 0 {
		return illegalVnodes(vnodes)
	}
	if c > math.MaxInt32 || vnodes > math.MaxInt32 || int64(c)*int64(vnodes) > maxEntries {
		return errors.New("hash: ring of " + strconv.Itoa(c) + " consumers x " + strconv.Itoa(vnodes) +
			" virtual nodes is too large")
	}
	return nil
}

// ringOf builds the ring of ids (vnodes >= 0, the size checked), or takes m's last one when it
// was built from the same ids.
func ringOf(ids []string, vnodes int, m *Memo) *Ring {
	if m != nil {
		m.begin(vnodes)
		if last := m.sameRing(ids); last != nil { // a kept ring has entries, and vnodes is its own
			return last
		}
	}
	r := &Ring{scratch: make([]byte, 0, 96), memo: m}
	if len(ids) == 0 || vnodes == 0 {
		return r
	}
	if m != nil {
		defer m.keepRing(r, ids)
	}
	if distinct, sorted := distinctIDs(ids); distinct {
		r.buildDistinct(ids, sorted, vnodes)
	} else {
		r.buildRepeated(ids, vnodes)
	}
	r.index()
	return r
}

// distinctIDs reports whether no id repeats, and whether the ids ascend. Ascending input (the
// normal case) is settled without a map.
func distinctIDs(ids []string) (distinct, ascending bool) {
	ascending = true
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			ascending = false
			break
		}
	}
	if ascending {
		return true, true
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			return false, false
		}
		seen[id] = struct{}{}
	}
	return true, false
}

// buildDistinct is the fast path: with no repeated id, e is always 0, so the ring is the sorted
// set of (hash, consumer) pairs where, on an equal hash, the later put (the larger consumer index)
// survives. ascending says the ids ascend, which the memo needs to find them.
func (r *Ring) buildDistinct(ids []string, ascending bool, vnodes int) {
	keys := make([]uint64, 0, len(ids)*vnodes)
	if r.memo != nil && ascending {
		hashes := r.memo.vnodeHashes(r, ids, vnodes)
		for i := range ids {
			for _, h := range hashes[i*vnodes : (i+1)*vnodes] {
				keys = append(keys, uint64(h)<<32|uint64(i))
			}
		}
	} else {
		if r.memo != nil {
			r.memo.forgetConsumers()
		}
		for i, id := range ids {
			r.hs = r.appendVnodeHashes(r.hs[:0], id, vnodes)
			for _, h := range r.hs {
				keys = append(keys, uint64(h)<<32|uint64(i))
			}
		}
	}
	keys = sortKeys(keys)
	r.hashes = make([]uint32, 0, len(keys))
	r.nodes = make([]int32, 0, len(keys))
	for j, key := range keys {
		if j+1 < len(keys) && keys[j+1]>>32 == key>>32 {
			continue // overwritten by a later put
		}
		r.hashes = append(r.hashes, uint32(key>>32))
		r.nodes = append(r.nodes, int32(uint32(key)))
	}
}

// sortKeys sorts ring keys (hash<<32 | consumer index, appended in index order) ascending. A
// large ring is radix-sorted on the hash alone: the sort is stable and keys arrive in index
// order, so equal hashes stay ordered by index, as a full comparison sort would leave them, and
// four counting passes beat a comparison sort in a wasm guest (RATIONALE.md).
func sortKeys(keys []uint64) []uint64 {
	if len(keys) < 256 {
		slices.Sort(keys)
		return keys
	}
	var counts [4][256]uint32
	for _, k := range keys {
		h := uint32(k >> 32)
		counts[0][h&0xff]++
		counts[1][h>>8&0xff]++
		counts[2][h>>16&0xff]++
		counts[3][h>>24]++
	}
	src, dst := keys, make([]uint64, len(keys))
	for pass := range counts {
		c := &counts[pass]
		var sum uint32
		for b, n := range c {
			c[b] = sum
			sum += n
		}
		shift := 32 + 8*pass
		for _, k := range src {
			b := k >> shift & 0xff
			dst[c[b]] = k
			c[b]++
		}
		src, dst = dst, src
	}
	return src
}

// buildRepeated simulates Java's TreeMap puts one by one, counting for each id the ring entries it
// still holds (Java's getExistingReplicas).
func (r *Ring) buildRepeated(ids []string, vnodes int) {
	first := make(map[string]int32, len(ids))
	ring := make(map[uint32]int32, len(ids)*vnodes)
	held := make([]int, len(ids)) // surviving entries per first index
	for i, id := range ids {
		f, ok := first[id]
		if !ok {
			f = int32(i)
			first[id] = f
		}
		e := held[f]
		r.vnodePrefix(id)
		for k := 0; k < vnodes; k++ {
			h := r.vnodeHash(e + k)
			if old, ok := ring[h]; ok {
				held[old]--
			}
			ring[h] = f
			held[f]++
		}
	}
	r.hashes = make([]uint32, 0, len(ring))
	for h := range ring {
		r.hashes = append(r.hashes, h)
	}
	slices.Sort(r.hashes)
	r.nodes = make([]int32, len(r.hashes))
	for j, h := range r.hashes {
		r.nodes[j] = ring[h]
	}
}

// appendVnodeHashes appends the hashes of id's keys "id-0" ... "id-(vnodes-1)" to dst.
func (r *Ring) appendVnodeHashes(dst []uint32, id string, vnodes int) []uint32 {
	r.vnodePrefix(id)
	if prefixHashing {
		for len(r.seq) < vnodes {
			r.seq = append(r.seq, uint32(len(r.seq)))
		}
		n := len(dst)
		dst = slices.Grow(dst, vnodes)[:n+vnodes]
		r.pm.sums(dst[n:], r.seq[:vnodes], 0)
		return dst
	}
	for k := 0; k < vnodes; k++ {
		dst = append(dst, r.vnodeHash(k))
	}
	return dst
}

// vnodePrefix starts the keys of consumer id's virtual nodes, id + "-" + index, for vnodeHash.
func (r *Ring) vnodePrefix(id string) {
	r.scratch = append(append(r.scratch[:0], id...), '-')
	if prefixHashing {
		r.pm.reset(r.scratch)
	}
}

// vnodeHash hashes the key id + "-" + index of the id vnodePrefix started (index >= 0).
func (r *Ring) vnodeHash(index int) uint32 {
	if prefixHashing {
		return r.pm.sum(uint32(index), 0)
	}
	return r.hashScratch(strconv.AppendInt(r.scratch, int64(index), 10))
}

// queuePrefix starts the keys of the queues of topic and broker, for queueHash.
func (r *Ring) queuePrefix(topic, broker string) {
	r.scratch = rocketmq.AppendQueuePrefix(r.scratch[:0], topic, broker)
	if prefixHashing {
		r.pm.reset(r.scratch)
	}
}

// queueHash hashes the key of queue id of the topic and broker queuePrefix started.
func (r *Ring) queueHash(id int32) uint32 {
	if prefixHashing && id >= 0 {
		return r.pm.sum(uint32(id), ']')
	}
	return r.hashScratch(rocketmq.AppendQueueID(r.scratch, id))
}

// hashScratch returns Hash(key), key being the prefix in scratch with more appended, and keeps
// the prefix in scratch (with key's buffer, should the appends have grown it). In a wasm guest
// prefixMD5 hashes a prefix's whole blocks once instead (md5.go); natively crypto/md5's
// assembly over the whole key is faster than that in Go (RATIONALE.md).
func (r *Ring) hashScratch(key []byte) uint32 {
	r.scratch = key[:len(r.scratch)]
	return Hash(key)
}

// Len returns the number of entries on the ring (c*V minus the puts lost to equal hashes).
func (r *Ring) Len() int { return len(r.hashes) }

// Owner returns the index (the FIRST index among 0..c-1 whose id equals the owning node's id) of
// the consumer that owns the queue (topic, brokerName, queueID), or -1 when the ring is empty.
// Lookup: smallest ring hash >= queue hash (inclusive), wrapping to the smallest. The queue key is
// MessageQueue.toString(): "MessageQueue [topic=T, brokerName=B, queueId=N]".
//
// Owner does not allocate once the scratch buffer has grown to the longest key; it is not safe for
// concurrent use.
func (r *Ring) Owner(topic, brokerName string, queueID int32) int {
	if len(r.hashes) == 0 {
		return -1
	}
	b := rocketmq.AppendQueueID(rocketmq.AppendQueuePrefix(r.scratch[:0], topic, brokerName), queueID)
	r.scratch = b
	return r.lookup(Hash(b))
}

// lookup returns the node of the first ring entry at or after h, wrapping to the first entry.
// The ring must not be empty.
func (r *Ring) lookup(h uint32) int {
	b := h >> r.shift
	i, j := int(r.buckets[b]), int(r.buckets[b+1])
	for i < j {
		m := int(uint(i+j) >> 1)
		if r.hashes[m] < h {
			i = m + 1
		} else {
			j = m
		}
	}
	if i == len(r.hashes) {
		i = 0
	}
	return int(r.nodes[i])
}

// maxBucketBits bounds the bucket index at 2^16 entries (256 KiB); larger rings search a few
// entries per bucket.
const maxBucketBits = 16

// index builds buckets: about one per ring entry, a power of two.
func (r *Ring) index() {
	if len(r.hashes) == 0 {
		return
	}
	nbits := min(bits.Len(uint(len(r.hashes))), maxBucketBits)
	r.shift = uint(32 - nbits)
	r.buckets = make([]int32, 1<<nbits+1)
	j := 0
	for b := range 1 << nbits {
		for j < len(r.hashes) && r.hashes[j]>>r.shift < uint32(b) {
			j++
		}
		r.buckets[b] = int32(j)
	}
	r.buckets[1<<nbits] = int32(len(r.hashes))
}

// Assign computes, for every queue i in 0..n-1 (queue(i) gives topic, brokerName, queueId), the
// owner index, writing into owners (len n). Like Owner, it is not safe for concurrent use.
//
// Java's result for one consumer is the queues, in mqAll order, whose owner is that consumer's first
// index in cidAll (see Queues), so one Assign serves the whole group.
func (r *Ring) Assign(owners []int, n int, queue func(int) (string, string, int32)) {
	assign(r, owners[:n], queue)
}

// AssignOwners is Assign writing int32 owners, one per entry of owners: the whole-group answer
// of ABI 1.1's owner form.
func (r *Ring) AssignOwners(owners []int32, queue func(int) (string, string, int32)) {
	assign(r, owners, queue)
}

func assign[T int | int32](r *Ring, owners []T, queue func(int) (string, string, int32)) {
	if len(r.hashes) == 0 {
		for i := range owners {
			owners[i] = -1
		}
		return
	}
	// Queues come sorted, so a broker's queues follow each other and their keys differ only from
	// the queue id on: the prefix is hashed once per broker (queuePrefix).
	started := false
	var topic, broker string
	var run *queueRun // the memo's hashes of this broker's queues, by queue id
	for i := range owners {
		t, br, id := queue(i)
		if !started || t != topic || br != broker {
			topic, broker, started = t, br, true
			r.queuePrefix(t, br)
			if r.memo != nil {
				run = r.memo.queueRun(t, br)
			}
		}
		if run != nil && uint32(id) < uint32(len(run.hashes)) && run.hashes[id] != 0 {
			owners[i] = T(r.lookup(uint32(run.hashes[id])))
			continue
		}
		h := r.queueHash(id)
		if run != nil {
			run.put(id, h)
		}
		owners[i] = T(r.lookup(h))
	}
	if r.memo != nil {
		r.memo.dropUnusedQueues()
	}
}

// AssignOwnerRuns is AssignOwners reading mqAll a run at a time: run(i, ids[:0]) returns the
// topic and broker that queues i..end-1 share, the end, and ids with those queues' ids appended
// (abi.View.QueueRun is one). A guest then pays one call per run, not a call and two string
// comparisons per queue, which in a wasm guest were most of a whole-group call (RATIONALE.md).
func (r *Ring) AssignOwnerRuns(owners []int32, run func(i int, ids []int32) (topic, broker string, end int, ids2 []int32)) {
	if len(r.hashes) == 0 {
		for i := range owners {
			owners[i] = -1
		}
		return
	}
	ids := r.ids
	for i := 0; i < len(owners); {
		var topic, broker string
		var end int
		topic, broker, end, ids = run(i, ids[:0])
		if end <= i || end > len(owners) || len(ids) != end-i {
			panic("hash: AssignOwnerRuns: run(" + strconv.Itoa(i) + ") returned a run ending at " + strconv.Itoa(end) +
				" with " + strconv.Itoa(len(ids)) + " ids")
		}
		r.assignRun(owners[i:end], topic, broker, ids)
		i = end
	}
	r.ids = ids
	if r.memo != nil {
		r.memo.dropUnusedQueues()
	}
}

// assignRun sets owners[k] to the owner of queue (topic, broker, ids[k]). A run the memo knows
// nothing of is hashed together (queueHashes), then looked up together (ringLookups); one it
// knows has the hashes it holds looked up as they are read (memoLookups), and the rest hashed
// and looked up after. In a wasm guest each of these is one call for the run, with no Go between
// queues.
func (r *Ring) assignRun(owners []int32, topic, broker string, ids []int32) {
	ids = ids[:len(owners)]
	var run *queueRun // the memo's hashes of this broker's queues, by queue id
	if r.memo != nil {
		run = r.memo.queueRun(topic, broker)
		if len(ids) > 0 {
			run.reserve(ids[len(ids)-1]) // the largest id when they are sorted, as a run's are
		}
	}
	if run == nil || run.known == 0 { // no hash known: every queue is hashed
		hs := slices.Grow(r.hs[:0], len(ids))[:len(ids)]
		r.hs = hs
		var sign int32   // negative when an id is
		top := int32(-1) // the largest id the memo keeps
		for _, id := range ids {
			sign |= id
			if id > top && id < maxMemoQueueID {
				top = id
			}
		}
		r.queuePrefix(topic, broker)
		r.queueHashes(hs, unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(ids))), len(ids)), sign < 0)
		if run != nil {
			run.reserve(top) // every id the memo keeps is then an index of its table
			run.known += memoPut(run.hashes, ids, hs)
		}
		ringLookups(r, hs, owners)
		return
	}
	// The queues the memo knows are looked up as their hashes are read (memoLookups); the others
	// are hashed, kept and looked up after.
	miss := slices.Grow(r.miss[:0], len(ids))[:len(ids)] // the places of the queues to hash
	miss = miss[:memoLookups(r, run.hashes, ids, owners, miss)]
	r.miss = miss
	if len(miss) == 0 {
		return
	}
	vs := r.vs[:0]
	var sign int32
	for _, k := range miss {
		vs = append(vs, uint32(ids[k]))
		sign |= ids[k]
	}
	r.queuePrefix(topic, broker)
	mh := slices.Grow(r.mh[:0], len(vs))[:len(vs)]
	r.vs, r.mh = vs, mh
	r.queueHashes(mh, vs, sign < 0)
	for j, k := range miss {
		run.put(ids[k], mh[j])
		owners[k] = int32(r.lookup(mh[j]))
	}
}

// queueHashes sets hs[j] to the hash of the key of queue id vs[j] (an int32 id as uint32) of the
// topic and broker queuePrefix started. In a wasm guest one prefixMD5.sums call hashes them all,
// unless one is negative (negative: "-1" is no digit string sums writes).
func (r *Ring) queueHashes(hs, vs []uint32, negative bool) {
	if prefixHashing && !negative {
		r.pm.sums(hs, vs, ']')
		return
	}
	for j, v := range vs {
		hs[j] = r.queueHash(int32(v))
	}
}

// Queues appends to dst, in mqAll order, the indices i with owners[i] == self: Java's result for
// the consumer whose first index in cidAll is self. self<0 (not a member) appends nothing.
func Queues(dst, owners []int, self int) []int {
	if self < 0 {
		return dst
	}
	for i, o := range owners {
		if o == self {
			dst = append(dst, i)
		}
	}
	return dst
}

// Memo keeps the MD5 hashes of one request's virtual nodes and queue keys for the next request
// of the same shape, so that a rebalance after a member joined or left hashes only what is new:
// MD5 is most of a ring's and an assignment's cost in a wasm guest (RATIONALE.md). It holds the
// hashes of the consumers and brokers of the last request only (4·V bytes a consumer, twice, 8
// bytes a queue id up to the largest one seen, queue ids from maxMemoQueueID on are not kept), so
// its memory is bounded by that request's size. The zero Memo is ready to use.
type Memo struct {
	vnodes int
	gen    uint32
	// hashIDs are the last request's consumers, ascending, and hashes their virtual nodes'
	// hashes, hashIDs[i]'s at hashes[i*vnodes:(i+1)*vnodes]. A request whose ids ascend finds
	// its known ones by merging the two lists: no map, and nothing allocated a consumer, which
	// a request from another group (none known) would pay for nothing (RATIONALE.md). next is
	// the buffer the next request's hashes are written to; the two are swapped.
	hashIDs      []string
	hashes, next []uint32
	runs         map[[2]string]*queueRun
	// order is the runs the last request named, in its order. A request naming the same
	// (topic, broker)s in the same order, as the same group again does, finds each at its place
	// with one comparison of its names instead of a map lookup that hashes them, and has nothing
	// to drop (RATIONALE.md). named counts the runs this request has named, inOrder how many of
	// them were order's at their places, and seen lists them for the next request.
	order, seen    []*queueRun
	named, inOrder int
	// ring was built from ringIDs (and vnodes): the next request with the same members in the
	// same order gets it back without sorting its keys again.
	ring    *Ring
	ringIDs []string
}

// sameRing returns the last ring when it was built from the same ids, else nil. ids that are
// the kept slice itself (RingIDs) are the same without a comparison: m keeps ids unchanged.
func (m *Memo) sameRing(ids []string) *Ring {
	if m.ring == nil {
		return nil
	}
	if len(ids) != len(m.ringIDs) || unsafe.SliceData(ids) != unsafe.SliceData(m.ringIDs) && !sameStrings(ids, m.ringIDs) {
		return nil
	}
	return m.ring
}

// RingIDs returns the ids the last ring m keeps was built from, or nil. A caller that finds its
// request's consumers are these (abi.View.SameConsumers compares them without reading the ids)
// passes this slice to NewRingMemoIDs, which then gets the ring back without comparing the ids.
// The slice is m's: it must not be changed.
func (m *Memo) RingIDs() []string { return m.ringIDs }

func (m *Memo) keepRing(r *Ring, ids []string) { m.ring, m.ringIDs = r, ids }

// queueRun holds the hashes of one (topic, broker)'s queue keys by queue id: 1<<32 | hash, 0 for
// not yet known.
type queueRun struct {
	hashes []uint64
	known  int // the hashes not 0
	gen    uint32
	key    [2]string // topic and broker
}

// maxMemoQueueID bounds the queue ids a Memo keeps a hash for.
const maxMemoQueueID = 1 << 16

// reserve makes room for the hashes of ids up to id.
func (r *queueRun) reserve(id int32) {
	if id >= 0 && id < maxMemoQueueID && int(id) >= len(r.hashes) {
		r.hashes = append(r.hashes, make([]uint64, int(id)+1-len(r.hashes))...)
	}
}

func (r *queueRun) put(id int32, h uint32) {
	if id < 0 || id >= maxMemoQueueID {
		return
	}
	r.reserve(id)
	if r.hashes[id] == 0 {
		r.known++
	}
	r.hashes[id] = 1<<32 | uint64(h)
}

// begin starts a request: a new virtual-node count forgets every consumer's hashes.
func (m *Memo) begin(vnodes int) {
	m.gen++
	m.seen = m.seen[:0] // left over should a panic have cut the last pass short
	m.named, m.inOrder = 0, 0
	if m.vnodes != vnodes {
		m.forgetConsumers()
		m.vnodes = vnodes
		m.ring, m.ringIDs = nil, nil
	}
	if m.runs == nil {
		m.runs = map[[2]string]*queueRun{}
	}
}

// vnodeHashes returns the hashes of the keys "id-0" ... "id-(vnodes-1)" of each of ids, which
// ascend, vnodes an id in ids' order, and keeps them (and ids) for the next request. The result
// is the Memo's until its next request.
func (m *Memo) vnodeHashes(r *Ring, ids []string, vnodes int) []uint32 {
	next := m.next[:0]
	known := m.hashIDs
	j := 0 // known[:j] are below the id at hand
	for _, id := range ids {
		for j < len(known) && known[j] < id {
			j++
		}
		if j < len(known) && known[j] == id {
			next = append(next, m.hashes[j*vnodes:(j+1)*vnodes]...)
			j++
			continue
		}
		next = r.appendVnodeHashes(next, id, vnodes)
	}
	m.hashIDs = ids
	m.hashes, m.next = next, m.hashes[:0]
	return next
}

// forgetConsumers drops the consumers' hashes (their buffers are kept).
func (m *Memo) forgetConsumers() {
	m.hashIDs = nil
	m.hashes = m.hashes[:0]
}

func (m *Memo) queueRun(topic, broker string) *queueRun {
	k := [2]string{topic, broker}
	i := m.named
	m.named++
	var run *queueRun
	if i == m.inOrder && i < len(m.order) && sameStrings(k[:], m.order[i].key[:]) {
		run = m.order[i]
		m.inOrder++
	} else if run = m.runs[k]; run == nil {
		run = &queueRun{key: k}
		m.runs[k] = run
	}
	run.gen = m.gen
	m.seen = append(m.seen, run)
	return run
}

// dropUnusedQueues ends a request's pass over its queues: the runs it did not name are dropped,
// and those it named, in its order, are the next request's order.
func (m *Memo) dropUnusedQueues() {
	if m.inOrder != len(m.order) || m.named != len(m.order) { // else it named order's runs only
		for k, run := range m.runs {
			if run.gen != m.gen {
				delete(m.runs, k)
			}
		}
		m.order, m.seen = m.seen, m.order
	}
	clear(m.seen) // the runs it holds are the map's or dropped
	m.seen = m.seen[:0]
	m.named, m.inOrder = 0, 0
}
