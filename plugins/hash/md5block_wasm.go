package hash

// md5Blocks runs the compression function over each whole 64-byte block of p, in order, from
// the state a0, b0, c0, d0 (md5block_wasm.s): in the wasm guest it is written in WebAssembly.
//
//go:noescape
func md5Blocks(a0, b0, c0, d0 uint32, p []byte) (a, b, c, d uint32)

// md5Sums sets out[k] to p.sum(vs[k], byte(closing)) for each k (len(out) >= len(vs)): in the
// wasm guest it is written in WebAssembly (md5block_wasm.s), the keys' digits, padding and
// length with their blocks, so that a key costs no Go call.
//
//go:noescape
func md5Sums(p *prefixMD5, vs []uint32, closing uint32, out []uint32)
