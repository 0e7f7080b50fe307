//go:build !wasm || tinygo

package abi

// sameIDs reports whether the consumers section's string ids (4 bytes each, checked against the
// table when the View was parsed) name ids, in order, in the string table of offsets offs and
// bytes blob. In the wasm guest it is written in WebAssembly (sameids_wasm.s).
func sameIDs(consumers, offs, blob []byte, ids []string) bool {
	if len(consumers)/4 != len(ids) {
		return false
	}
	for i, id := range ids {
		se := le.Uint64(offs[4*le.Uint32(consumers[4*i:]):])
		if string(blob[uint32(se):se>>32]) != id {
			return false
		}
	}
	return true
}
