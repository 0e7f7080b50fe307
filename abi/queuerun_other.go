//go:build !wasm || tinygo

package abi

// runIDs writes to ids the queue ids of the 12-byte queue records at the start of q whose first
// 8 bytes (topic and broker) are names, up to the first that is not or the end of q or of ids,
// and returns how many it wrote. In the wasm guest it is written in WebAssembly
// (queuerun_wasm.s).
func runIDs(q []byte, names uint64, ids []int32) int {
	n := 0
	for ; len(q) >= 12 && n < len(ids) && le.Uint64(q) == names; q = q[12:] {
		ids[n] = int32(le.Uint32(q[8:12:12]))
		n++
	}
	return n
}
