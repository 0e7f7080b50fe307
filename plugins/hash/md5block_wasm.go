package hash

// md5Block runs the compression function over the first 64 bytes of p (md5block_wasm.s): in
// the wasm guest it is written in WebAssembly.
//
//go:noescape
func md5Block(a0, b0, c0, d0 uint32, p []byte) (a, b, c, d uint32)
