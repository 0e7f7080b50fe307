//go:build !wasm

package hash

// ringLookups sets out[j] to r.lookup(hs[j]) for each j: the Go that lookups_wasm.s is in the
// wasm guest.
func ringLookups(r *Ring, hs []uint32, out []int32) {
	for j, h := range hs {
		out[j] = int32(r.lookup(h))
	}
}
