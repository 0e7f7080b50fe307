package abi

import (
	"slices"
	"unsafe"
)

// The owner form of a response (ABI 1.1, ABI.md §5.4): for a whole-group request, one u32 per
// queue naming the index in CONSUMERS of the consumer that owns it, or NoOwner. Every consumer's
// list is then its queues in mqAll order. A plugin may answer in this form only when the request's
// minor version is at least 1 and the request has no TARGETS section.

// OwnersMagic opens an owner-form response.
const OwnersMagic = "ALRO"

// NoOwner is the owner of a queue that no consumer takes.
const NoOwner = -1

// MinorOwners is the first minor version whose hosts accept the owner form.
const MinorOwners = 1

// AcceptsOwners reports whether a plugin may answer the request in v in the owner form: the host
// speaks 1.1 or later, and the request asks for the whole group.
func (v *View) AcceptsOwners() bool { return v.Minor() >= MinorOwners && !v.hasTarget }

// DistinctConsumers reports whether no consumer id appears twice in cidAll. With a repeated id,
// RocketMQ's strategies give both occurrences the answer of the first, which the owner form cannot
// say, so the SDK answers such a request one consumer at a time.
func (v *View) DistinctConsumers() bool {
	// The Go writer numbers strings in the order it meets them, so the ids of a canonical cidAll
	// without a repeat increase: Parse noted whether they do as it checked them, so that this
	// costs no pass of its own (in a wasm guest, a loop iteration is some 60 instructions;
	// RATIONALE.md).
	if v.increasing {
		return true
	}
	for i, n := 0, v.NumConsumers(); i < n; i++ {
		if v.firstIndex(le.Uint32(v.consumers[4*i:])) != i {
			return false
		}
	}
	return true
}

// HasEmptyConsumer reports whether some id of cidAll is the empty string (RocketMQ's strategies
// fail such a consumer), from the string table's offsets, without building the ids.
func (v *View) HasEmptyConsumer() bool {
	if v.nonEmpty {
		return false // Parse found no empty string in the table
	}
	// Four ids an iteration with no call and no branch but the loop's: a string of length l
	// adds (l-1)>>31 to empty, which is 1 for l == 0 only (a request is far below 2 GB).
	var empty uint32
	offs := v.offs
	o := v.consumers
	for ; len(o) >= 16; o = o[16:] {
		b := o[:16:16] // ids below nstr: Parse checked them
		i0, i1, i2, i3 := 4*le.Uint32(b), 4*le.Uint32(b[4:]), 4*le.Uint32(b[8:]), 4*le.Uint32(b[12:])
		empty |= (le.Uint32(offs[i0+4:]) - le.Uint32(offs[i0:]) - 1) | (le.Uint32(offs[i1+4:]) - le.Uint32(offs[i1:]) - 1) |
			(le.Uint32(offs[i2+4:]) - le.Uint32(offs[i2:]) - 1) | (le.Uint32(offs[i3+4:]) - le.Uint32(offs[i3:]) - 1)
	}
	for ; len(o) >= 4; o = o[4:] {
		i := 4 * le.Uint32(o[:4:4])
		empty |= le.Uint32(offs[i+4:]) - le.Uint32(offs[i:]) - 1
	}
	return empty>>31 != 0
}

// AppendOwners appends the owner-form response for owners (one entry per queue: a consumer
// index, or NoOwner) to dst.
func AppendOwners(dst []byte, owners []int32) []byte {
	dst = slices.Grow(dst, headerSize+4*len(owners))
	w0, w1 := ownersHeader(len(owners))
	dst = le.AppendUint64(dst, w0)
	dst = le.AppendUint64(dst, w1)
	return appendWords(dst, owners)
}

// OwnersResponse returns, in dst's storage (grown as needed), an owner-form response for n
// queues whose owners the caller writes in place through the second result, which aliases it:
// AppendOwners without the copy (in a wasm guest, a copy is a call to memmove). On a machine that
// does not store an int32 as the wire does, or for n == 0, owners is nil and the caller writes
// the response with AppendOwners instead.
func OwnersResponse(dst []byte, n int) (resp []byte, owners []int32) {
	resp = slices.Grow(dst[:0], headerSize+4*n)[:headerSize+4*n]
	w0, w1 := ownersHeader(n)
	le.PutUint64(resp, w0)
	le.PutUint64(resp[8:], w1)
	if !littleEndian || n == 0 {
		return resp, nil
	}
	return resp, unsafe.Slice((*int32)(unsafe.Pointer(&resp[headerSize])), n)
}

// ownersHeader is the header of an owner-form response for n queues, as the two little-endian
// 8-byte words it is written with.
func ownersHeader(n int) (w0, w1 uint64) {
	magic := uint64(OwnersMagic[0]) | uint64(OwnersMagic[1])<<8 | uint64(OwnersMagic[2])<<16 | uint64(OwnersMagic[3])<<24
	return magic | Major<<32 | MinorOwners<<48, uint64(headerSize+4*n) | uint64(n)<<32
}

// littleEndian: this machine stores an int32 as the wire does.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// decodeOwners decodes an owner-form response, whose magic the caller has checked, into r.Owners.
func decodeOwners(b []byte, r *Response, share bool) error {
	if major := le.Uint16(b[4:]); major != Major {
		return errorf("response ABI major version %d, this reader speaks %d", major, Major)
	}
	if n := le.Uint32(b[8:]); uint64(n) != uint64(len(b)) {
		return errorf("response header says %d bytes, got %d", n, len(b))
	}
	count := uint64(le.Uint32(b[12:]))
	if count*4 != uint64(len(b)-headerSize) {
		return errorf("owner-form response declares %d queues in %d bytes (want %d)", count, len(b), headerSize+4*count)
	}
	r.Results = r.Results[:0]
	p := b[headerSize:]
	switch {
	case share && littleEndian && count > 0 && uintptr(unsafe.Pointer(&p[0]))%4 == 0:
		r.Owners = unsafe.Slice((*int32)(unsafe.Pointer(&p[0])), count)
		return nil
	case share:
		r.Owners = make([]int32, count) // r.Owners may be an earlier message's memory: never write there
	default:
		r.Owners = slices.Grow(r.Owners[:0], int(count))[:count]
	}
	if littleEndian && count > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&r.Owners[0])), 4*count), p)
		return nil
	}
	for i := range r.Owners {
		r.Owners[i] = int32(le.Uint32(p[4*i:]))
	}
	return nil
}

// CheckOwners checks an owner-form answer (one entry per queue of the whole-group request r: a
// consumer index, or NoOwner) as Validate does, without building the per-consumer lists: every
// entry is NoOwner or an index in [0, len(r.Consumers)) that is the first of its consumer id. A
// caller that reads the owners itself (one owner per queue is what it wants) skips the lists'
// allocation and their fill (RATIONALE.md).
func CheckOwners(r *Request, owners []int32) error {
	return checkOwners(r, owners, firstOwners(r.Consumers))
}

// checkOwners is CheckOwners with the first index of every consumer's id (first, from
// firstOwners; nil when no id repeats).
func checkOwners(r *Request, owners, first []int32) error {
	if err := checkOwnersFit(r, owners); err != nil {
		return err
	}
	nc := len(r.Consumers)
	for q, o := range owners {
		if uint32(o) >= uint32(nc) && o != NoOwner {
			return ownerOutOfRange(r, q, o)
		}
	}
	return checkRepeats(r, owners, first)
}

// checkOwnersFit refuses an owner-form answer to a request with targets, and one whose count of
// owners is not the request's count of queues.
func checkOwnersFit(r *Request, owners []int32) error {
	if r.Targets != nil {
		return errorf("owner-form answer to a request with targets")
	}
	if len(owners) != len(r.Queues) {
		return errorf("owner-form answer names owners of %d queues, the request has %d", len(owners), len(r.Queues))
	}
	return nil
}

// ownerOutOfRange is the error for queue q's owner o, neither NoOwner nor a consumer index.
func ownerOutOfRange(r *Request, q int, o int32) error {
	return errorf("queue %d (%s): owner index %d out of range [0,%d)", q, r.Queues[q], o, len(r.Consumers))
}

// firstOwners returns the first index of every consumer's id: only first occurrences own queues,
// and a repeated id's results are the first one's. With distinct ids in canonical order (the
// host's requests) every index is its own first, and it returns nil.
func firstOwners(consumers []string) []int32 {
	if increasing(consumers) {
		return nil
	}
	return firstIndices(consumers, slices.IsSorted(consumers))
}

// increasing reports whether ids are strictly increasing: sorted and distinct, which one
// comparison a pair settles.
func increasing(ids []string) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			return false
		}
	}
	return true
}

// checkRepeats refuses an owner that is not the first index of its id (first from firstOwners).
func checkRepeats(r *Request, owners, first []int32) error {
	if first == nil {
		return nil
	}
	for q, o := range owners {
		if o >= 0 && first[o] != o {
			return errorf("queue %d (%s): owner index %d repeats consumer %q (index %d)", q, r.Queues[q], o, r.Consumers[o], first[o])
		}
	}
	return nil
}

// resolveOwners checks an owner-form answer against its request and writes the equivalent
// Results: one per consumer, its queues in mqAll order, all of them slices of one array. first
// is the first index of every consumer's id (firstOwners; nil when no id repeats).
func resolveOwners(r *Request, resp *Response, first []int32) error {
	flat, counts, err := checkedOwnerLists(r, resp.Owners, first)
	if err != nil {
		return err
	}
	nc := len(r.Consumers)
	resp.Results = slices.Grow(resp.Results[:0], nc)[:nc]
	for i := range nc {
		f := int32(i)
		if first != nil {
			f = first[i]
		}
		resp.Results[i] = Result{Indices: flat[counts[f]:counts[f+1]:counts[f+1]]}
	}
	return nil
}

// checkedOwnerLists checks an owner-form answer to r as checkOwners does and groups it by owner
// (groupOwners), in one pass over the owners: the range check is the grouping's own. first is
// the first index of every consumer's id (firstOwners; nil when no id repeats).
func checkedOwnerLists(r *Request, owners, first []int32) (flat, bounds []int, err error) {
	if err := checkOwnersFit(r, owners); err != nil {
		return nil, nil, err
	}
	flat, bounds, bad := groupOwners(owners, len(r.Consumers))
	if bad >= 0 {
		return nil, nil, ownerOutOfRange(r, bad, owners[bad])
	}
	if err := checkRepeats(r, owners, first); err != nil {
		return nil, nil, err
	}
	return flat, bounds, nil
}

// groupOwners lists the queues of every owner index o in [0, nc), in queue order, at
// flat[counts[o]:counts[o+1]]. bad is the first queue whose owner is neither NoOwner nor in
// range, or -1.
func groupOwners(owners []int32, nc int) (flat, counts []int, bad int) {
	nq := len(owners)
	// counts[o] is where owner o's queues start in flat, counts[o+1] where they end.
	counts = make([]int, nc+1)
	// Owners that never decrease, none missing, as AVG gives, make every consumer's list a run
	// of consecutive queues: queue q is at position q, and the runs' bounds are all there is to
	// find. Within a run an owner equals the one before, checked where the run began, so an
	// entry costs one comparison; counting each queue's owner instead adds to one counter
	// again and again, each load waiting for the store before it.
	runs, prev := nc > 0, int32(0)
	for q, o := range owners {
		if o != prev {
			if o < prev || o >= int32(nc) { // NoOwner, a descent, or out of range
				runs = false
				break
			}
			for c := prev + 1; c <= o; c++ {
				counts[c] = q
			}
			prev = o
		}
	}
	if runs {
		for c := int(prev) + 1; c <= nc; c++ {
			counts[c] = nq
		}
		flat = make([]int, nq)
		for q := range flat {
			flat[q] = q
		}
		return flat, counts, -1
	}
	clear(counts)
	after := counts[1:] // after[o] counts owner o's queues
	for q, o := range owners {
		if uint32(o) < uint32(len(after)) {
			after[o]++
		} else if o != NoOwner {
			return nil, nil, q
		}
	}
	for o := range nc {
		counts[o+1] += counts[o]
	}
	flat = make([]int, counts[nc])
	next := slices.Clone(counts[:nc])
	for q, o := range owners {
		if o >= 0 {
			flat[next[o]] = q
			next[o]++
		}
	}
	return flat, counts, -1
}

// firstIndices returns, for every consumer, the first index of its id.
func firstIndices(consumers []string, sorted bool) []int32 {
	nc := len(consumers)
	first := make([]int32, nc)
	var seen map[string]int32
	for i := range nc {
		switch {
		case i > 0 && sorted && consumers[i] == consumers[i-1]:
			first[i] = first[i-1]
		case sorted:
			first[i] = int32(i)
		default:
			if seen == nil {
				seen = make(map[string]int32, nc)
			}
			f, ok := seen[consumers[i]]
			if !ok {
				f = int32(i)
				seen[consumers[i]] = f
			}
			first[i] = f
		}
	}
	return first
}

// ResolveOwners turns owners (one entry per queue of the whole-group request r: a consumer index,
// or NoOwner) into the Response a list-form answer would be, after the checks of Validate. It is
// what the host does with an owner-form answer, and what a native strategy that computes owners
// uses to answer as a plugin would.
func ResolveOwners(r *Request, owners []int32) (*Response, error) {
	resp := &Response{Owners: owners}
	if err := resolveOwners(r, resp, firstOwners(r.Consumers)); err != nil {
		return nil, err
	}
	return resp, nil
}
