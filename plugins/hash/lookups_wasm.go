package hash

// ringLookups sets out[j] to r.lookup(hs[j]) for each j (len(out) >= len(hs), r not empty): in
// the wasm guest it is written in WebAssembly (lookups_wasm.s), a search with no Go between
// keys; natively it is lookups.go.
//
//go:noescape
func ringLookups(r *Ring, hs []uint32, out []int32)
