//go:build !tinygo

package abi

// sameIDs reports whether the consumers section's string ids (4 bytes each, checked against the
// table when the View was parsed) name ids, in order, in the string table of offsets offs and
// bytes blob: in the wasm guest it is written in WebAssembly (sameids_wasm.s), eight bytes a step
// where Go's string comparison takes one, and no string made of the table's bytes.
//
//go:noescape
func sameIDs(consumers, offs, blob []byte, ids []string) bool
