package hash

// ringLookups sets out[j] to r.lookup(hs[j]) for each j (len(out) >= len(hs), r not empty): in
// the wasm guest it is written in WebAssembly (lookups_wasm.s), a search with no Go between
// keys; natively it is lookups.go.
//
//go:noescape
func ringLookups(r *Ring, hs []uint32, out []int32)

// memoPut sets known[ids[k]] to 1<<32 | hs[k] for each k with ids[k] an index of known, and
// returns how many of those entries were 0 before: in the wasm guest it is written in
// WebAssembly (lookups_wasm.s).
//
//go:noescape
func memoPut(known []uint64, ids []int32, hs []uint32) int

// sameStrings reports whether a and b hold the same strings in order (slices.Equal): in the
// wasm guest it is written in WebAssembly (lookups_wasm.s), eight bytes a step where Go's string
// comparison takes one; natively it is lookups.go.
//
//go:noescape
func sameStrings(a, b []string) bool

// memoLookups sets out[k] to the ring's owner of the hash a memo's known (1<<32 | hash by queue
// id, 0 for unknown) holds for ids[k], for each id that has one, appends the places of the
// others to miss, and returns how many it appended (len(out), len(miss) >= len(ids), r not
// empty): in the wasm guest it is written in WebAssembly (lookups_wasm.s), the memo's read and
// the ring's search in one loop; natively it is lookups.go.
//
//go:noescape
func memoLookups(r *Ring, known []uint64, ids []int32, out []int32, miss []int32) int
