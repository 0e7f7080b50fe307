//go:build !wasm

package hash

import "slices"

// ringLookups sets out[j] to r.lookup(hs[j]) for each j: the Go that lookups_wasm.s is in the
// wasm guest.
func ringLookups(r *Ring, hs []uint32, out []int32) {
	for j, h := range hs {
		out[j] = int32(r.lookup(h))
	}
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

// sameStrings reports whether a and b hold the same strings in order: the Go that lookups_wasm.s
// is in the wasm guest.
func sameStrings(a, b []string) bool { return slices.Equal(a, b) }

// memoLookups sets out[k] to r.lookup of the hash known holds for ids[k], or appends k to miss,
// and returns how many it appended: the Go that lookups_wasm.s is in the wasm guest.
func memoLookups(r *Ring, known []uint64, ids []int32, out []int32, miss []int32) int {
	n := 0
	for k, id := range ids {
		if uint32(id) < uint32(len(known)) && known[id] != 0 {
			out[k] = int32(r.lookup(uint32(known[id])))
			continue
		}
		miss[n] = int32(k)
		n++
	}
	return n
}
