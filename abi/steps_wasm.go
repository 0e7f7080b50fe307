//go:build !tinygo

package abi

// steps is written in WebAssembly in the wasm guest (steps_wasm.s); steps_other.go says what it
// returns, and serves TinyGo, which does not assemble Go's assembly.
//
//go:noescape
func steps(b []byte, prev int64) (or, orLess1, last int64)
