//go:build !wasm || tinygo

package abi

// steps reads b as little-endian uint32s a[0..] and returns the OR of their steps d (a[0]-prev,
// a[1]-a[0], ...), the OR of d-1, and the last of them (prev for none): the first is negative when
// some step is, the second when some step is not positive. Eight values an iteration, read two
// to a load, with no branch but the loop's. In the wasm guest it is written in WebAssembly
// (steps_wasm.s).
func steps(b []byte, prev int64) (or, orLess1, last int64) {
	last = prev
	for ; len(b) >= 32; b = b[32:] {
		c := b[:32:32]
		w0, w1, w2, w3 := le.Uint64(c), le.Uint64(c[8:]), le.Uint64(c[16:]), le.Uint64(c[24:])
		a0, a1, a2, a3 := int64(uint32(w0)), int64(w0>>32), int64(uint32(w1)), int64(w1>>32)
		a4, a5, a6, a7 := int64(uint32(w2)), int64(w2>>32), int64(uint32(w3)), int64(w3>>32)
		d0, d1, d2, d3, d4, d5, d6, d7 := a0-last, a1-a0, a2-a1, a3-a2, a4-a3, a5-a4, a6-a5, a7-a6
		or |= d0 | d1 | d2 | d3 | d4 | d5 | d6 | d7
		orLess1 |= (d0 - 1) | (d1 - 1) | (d2 - 1) | (d3 - 1) | (d4 - 1) | (d5 - 1) | (d6 - 1) | (d7 - 1)
		last = a7
	}
	for ; len(b) >= 4; b = b[4:] {
		a := int64(le.Uint32(b[:4:4]))
		or |= a - last
		orLess1 |= a - last - 1
		last = a
	}
	return or, orLess1, last
}
