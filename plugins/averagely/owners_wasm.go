//go:build !tinygo

package averagely

// fillBlocks writes Owners' answer for c > 0 consumers: in the wasm guest it is written in
// WebAssembly (owners_wasm.s), natively and under TinyGo, which does not assemble Go's assembly,
// in Go (owners_other.go).
//
//go:noescape
func fillBlocks(owners []int32, c int)
