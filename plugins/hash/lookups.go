//go:build !wasm

package hash

// ringLookups sets out[j] to r.lookup(hs[j]) for each j: the Go that lookups_wasm.s is in the
// wasm guest.
func ringLookups(r *Ring, hs []uint32, out []int32) {
	for j, h := range hs {
		out[j] = int32(r.lookup(h))
	}
}

// memoHashes sets hs[k] to the hash known holds for ids[k], or appends k to miss, and returns
// how many it appended: the Go that lookups_wasm.s is in the wasm guest.
func memoHashes(known []uint64, ids []int32, hs []uint32, miss []int32) int {
	n := 0
	for k, id := range ids {
		if uint32(id) < uint32(len(known)) && known[id] != 0 {
			hs[k] = uint32(known[id])
			continue
		}
		miss[n] = int32(k)
		n++
	}
	return n
}

// memoPut sets known[ids[k]] to 1<<32 | hs[k] for each k with ids[k] an index of known, and
// returns how many of those entries were 0 before: the Go that lookups_wasm.s is in the wasm
// guest.
func memoPut(known []uint64, ids []int32, hs []uint32) int {
	added := 0
	for k, id := range ids {
		if uint32(id) < uint32(len(known)) {
			if known[id] == 0 {
				added++
			}
			known[id] = 1<<32 | uint64(hs[k])
		}
	}
	return added
}
