package hash

// md5Blocks runs the compression function over each whole 64-byte block of p, in order, from
// the state a0, b0, c0, d0 (md5block_wasm.s): in the wasm guest it is written in WebAssembly.
//
//go:noescape
func md5Blocks(a0, b0, c0, d0 uint32, p []byte) (a, b, c, d uint32)
