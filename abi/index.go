package abi

// Indices by string id (ABI.md §4.4: each distinct string is stored once, so equal ids are equal
// strings), for a strategy that would otherwise look consumer ids up by string: in a wasm guest a
// map from strings costs hundreds of instructions a lookup, an id a table load.

// ConsumerFirstIndex returns the index in cidAll of the first occurrence of consumer i's id.
func (v *View) ConsumerFirstIndex(i int) int { return v.firstIndex(le.Uint32(v.consumers[4*i:])) }

// HasPrevOwners reports whether the request carries previous owners at all.
func (v *View) HasPrevOwners() bool { return v.prev != nil }

// PrevOwnerIndex returns the index in cidAll of the first occurrence of the id that owned queue i
// in the previous generation, or -1 when no one did or that id is not in cidAll.
func (v *View) PrevOwnerIndex(i int) int {
	if v.prev == nil {
		return -1
	}
	id := le.Uint32(v.prev[4*i:])
	if id == NoString {
		return -1
	}
	return v.firstIndex(id)
}

// PrevOwnerIndices sets dst[i] to PrevOwnerIndex(i) for every queue, with len(dst) ==
// NumQueues(). It is the per-queue call in one loop: in a wasm guest a call costs tens of
// nanoseconds, more than the lookup itself.
func (v *View) PrevOwnerIndices(dst []int32) {
	if v.prev == nil {
		for i := range dst {
			dst[i] = -1
		}
		return
	}
	if !v.hasFirst {
		v.indexConsumers()
	}
	prev, first := v.prev[:4*len(dst)], v.first
	for i := range dst {
		id := le.Uint32(prev[4*i:])
		if id == NoString || int(id) >= len(first) {
			dst[i] = -1
			continue
		}
		dst[i] = first[id]
	}
}
