package hash

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

var le = binary.LittleEndian

// MD5 (RFC 1321) for the wasm guest, where Go's code takes every loop iteration and every call
// through a function's dispatch table: crypto/md5's Sum (its Write calls, the padding written
// through Write, the block loop) was about half of a cold ring's guest (RATIONALE.md). The
// compression function, md5Blocks, and md5Sums, the keys of a prefix with their digits written,
// are written in WebAssembly for the guest (md5block_wasm.s, which md5block_gen.go writes) and in
// Go elsewhere (md5block.go). Natively Hash keeps crypto/md5's assembly; TestMD5Prefix and
// FuzzMD5Prefix hold the ways to one answer, natively and in the guest (TestGuestMD5).

//go:generate go run md5block_gen.go

// md5Prefix is the first 4 bytes of MD5(key), big-endian: Hash's value.
func md5Prefix(key []byte) uint32 {
	a0, b0, c0, d0 := uint32(0x67452301), uint32(0xefcdab89), uint32(0x98badcfe), uint32(0x10325476)
	n := len(key)
	whole := n &^ 63
	a0, b0, c0, d0 = md5Blocks(a0, b0, c0, d0, key[:whole])
	key = key[whole:]
	// The last one or two blocks: the rest of the key, the 0x80 byte, zeros, the length in bits.
	var tail [128]byte
	copy(tail[:], key)
	tail[len(key)] = 0x80
	end := 64
	if len(key) >= 56 {
		end = 128
	}
	binary.LittleEndian.PutUint64(tail[end-8:end], uint64(n)<<3)
	a, _, _, _ := md5Blocks(a0, b0, c0, d0, tail[:end])
	return bits.ReverseBytes32(a) // the digest's first 4 bytes, big-endian
}

// prefixMD5 hashes keys that share a prefix and end in a decimal number (a virtual node's
// "id-k", a queue's "MessageQueue [...queueId=N]"): MD5's state after the prefix's whole 64-byte
// blocks is computed once, and each key costs only its last one or two blocks, its digits
// written in place after the rest of the prefix with the padding, without a loop (every loop
// iteration is a trip through the function's dispatch in Go's wasm: RATIONALE.md). buf is zero
// past the rest of the prefix between calls.
type prefixMD5 struct {
	a, b, c, d uint32 // the state after done bytes of the prefix
	done       int    // a multiple of 64
	n          int    // the prefix's bytes past done, at the start of buf
	buf        [128]byte
}

// maxSuffix is the longest suffix sum writes: 10 digits and one closing byte.
const maxSuffix = 11

// reset starts the keys of prefix.
func (p *prefixMD5) reset(prefix []byte) {
	p.a, p.b, p.c, p.d = 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476
	whole := len(prefix) &^ 63
	p.a, p.b, p.c, p.d = md5Blocks(p.a, p.b, p.c, p.d, prefix[:whole])
	p.buf = [128]byte{}
	p.done = whole
	p.n = copy(p.buf[:], prefix[whole:])
}

// sum returns the Hash of the prefix, the decimal digits of v and then closing (0: none).
func (p *prefixMD5) sum(v uint32, closing byte) uint32 {
	n := p.n + putDecimal(p.buf[p.n:p.n+maxSuffix:p.n+maxSuffix], v)
	if closing != 0 {
		p.buf[n] = closing
		n++
	}
	p.buf[n] = 0x80
	end := 64
	if n >= 56 {
		end = 128
	}
	le.PutUint64(p.buf[end-8:end], uint64(p.done+n)<<3)
	a, _, _, _ := md5Blocks(p.a, p.b, p.c, p.d, p.buf[:end])
	le.PutUint64(p.buf[end-8:end], 0)
	// Back to zeros past the prefix: at most maxSuffix+1 bytes were written there.
	le.PutUint64(p.buf[p.n:], 0)
	le.PutUint32(p.buf[p.n+8:], 0)
	return bits.ReverseBytes32(a)
}

// sums sets out[k] to sum(vs[k], closing) for each k, in one call (md5Sums): in the wasm guest
// a key's Go calls and their dispatch cost more than its digits and padding (RATIONALE.md).
func (p *prefixMD5) sums(out, vs []uint32, closing byte) {
	md5Sums(p, vs, uint32(closing), out[:len(vs)])
}

// putDecimal writes v's decimal digits at the start of b (len(b) >= 10) and returns their count.
// Up to 9,999 it takes the digits two at a time from a table, smallest numbers first (virtual
// node indices and queue ids are small), with no loop; larger ones go through strconv.
func putDecimal(b []byte, v uint32) int {
	_ = b[9]
	switch {
	case v < 10:
		b[0] = byte('0' + v)
		return 1
	case v < 100:
		b[0], b[1] = pairs[2*v], pairs[2*v+1]
		return 2
	case v < 1000:
		hi, lo := v/100, v%100
		b[0], b[1], b[2] = byte('0'+hi), pairs[2*lo], pairs[2*lo+1]
		return 3
	case v < 10000:
		hi, lo := v/100, v%100
		b[0], b[1], b[2], b[3] = pairs[2*hi], pairs[2*hi+1], pairs[2*lo], pairs[2*lo+1]
		return 4
	}
	return len(strconv.AppendUint(b[:0], uint64(v), 10))
}

// pairs holds 00 to 99, two digits each.
const pairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" + "30313233343536373839" +
	"40414243444546474849" + "50515253545556575859" + "60616263646566676869" + "70717273747576777879" +
	"80818283848586878889" + "90919293949596979899"
