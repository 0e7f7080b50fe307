package hash

// ringLookups sets out[j] to r.lookup(hs[j]) for each j (len(out) >= len(hs), r not empty): in
// the wasm guest it is written in WebAssembly (lookups_wasm.s), a search with no Go between
// keys; natively it is lookups.go.
//
//go:noescape
func ringLookups(r *Ring, hs []uint32, out []int32)

// memoHashes sets hs[k] to the hash a memo's known (1<<32 | hash by queue id, 0 for unknown)
// holds for ids[k], or appends k to miss, and returns how many it appended (len(hs), len(miss)
// >= len(ids)): in the wasm guest it is written in WebAssembly (lookups_wasm.s).
//
//go:noescape
func memoHashes(known []uint64, ids []int32, hs []uint32, miss []int32) int

// memoPut sets known[ids[k]] to 1<<32 | hs[k] for each k with ids[k] an index of known, and
// returns how many of those entries were 0 before: in the wasm guest it is written in
// WebAssembly (lookups_wasm.s).
//
//go:noescape
func memoPut(known []uint64, ids []int32, hs []uint32) int
