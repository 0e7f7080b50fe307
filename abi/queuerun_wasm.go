//go:build !tinygo

package abi

// runIDs writes to ids the queue ids of the records at the start of q whose topic and broker are
// names, and returns how many (queuerun_other.go says it in Go). In the wasm guest it is written
// in WebAssembly (queuerun_wasm.s), a run with no Go between its queues.
//
//go:noescape
func runIDs(q []byte, names uint64, ids []int32) int
