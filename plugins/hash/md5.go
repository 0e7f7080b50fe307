package hash

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

var le = binary.LittleEndian

// MD5 (RFC 1321) unrolled for the wasm guest, where Go's code takes every loop iteration and
// every call through a function's dispatch table: crypto/md5's Sum (its Write calls, the padding
// written through Write, the block loop) was about half of a cold ring's guest (RATIONALE.md).
// Natively Hash keeps crypto/md5's assembly; TestMD5Prefix and FuzzMD5Prefix hold the two to one
// answer.

// md5Prefix is the first 4 bytes of MD5(key), big-endian: Hash's value.
func md5Prefix(key []byte) uint32 {
	a0, b0, c0, d0 := uint32(0x67452301), uint32(0xefcdab89), uint32(0x98badcfe), uint32(0x10325476)
	n := len(key)
	for len(key) >= 64 {
		a0, b0, c0, d0 = md5Block(a0, b0, c0, d0, key[:64:64])
		key = key[64:]
	}
	// The last one or two blocks: the rest of the key, the 0x80 byte, zeros, the length in bits.
	var tail [128]byte
	copy(tail[:], key)
	tail[len(key)] = 0x80
	end := 64
	if len(key) >= 56 {
		end = 128
		a0, b0, c0, d0 = md5Block(a0, b0, c0, d0, tail[:64:64])
	}
	binary.LittleEndian.PutUint64(tail[end-8:end], uint64(n)<<3)
	a, _, _, _ := md5Block(a0, b0, c0, d0, tail[end-64:end:end])
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
	for off := 0; off < whole; off += 64 {
		p.a, p.b, p.c, p.d = md5Block(p.a, p.b, p.c, p.d, prefix[off:off+64:off+64])
	}
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
	a, b, c, d := p.a, p.b, p.c, p.d
	length := uint64(p.done+n) << 3
	if n < 56 {
		le.PutUint64(p.buf[56:64], length)
		a, _, _, _ = md5Block(a, b, c, d, p.buf[:64:64])
		le.PutUint64(p.buf[56:64], 0)
	} else {
		le.PutUint64(p.buf[120:128], length)
		a, b, c, d = md5Block(a, b, c, d, p.buf[:64:64])
		a, _, _, _ = md5Block(a, b, c, d, p.buf[64:128:128])
		le.PutUint64(p.buf[120:128], 0)
	}
	// Back to zeros past the prefix: at most maxSuffix+1 bytes were written there.
	le.PutUint64(p.buf[p.n:], 0)
	le.PutUint32(p.buf[p.n+8:], 0)
	return bits.ReverseBytes32(a)
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

// md5Block runs the compression function over one 64-byte block.
func md5Block(a0, b0, c0, d0 uint32, p []byte) (uint32, uint32, uint32, uint32) {
	_ = p[63]
	x0 := binary.LittleEndian.Uint32(p[0:])
	x1 := binary.LittleEndian.Uint32(p[4:])
	x2 := binary.LittleEndian.Uint32(p[8:])
	x3 := binary.LittleEndian.Uint32(p[12:])
	x4 := binary.LittleEndian.Uint32(p[16:])
	x5 := binary.LittleEndian.Uint32(p[20:])
	x6 := binary.LittleEndian.Uint32(p[24:])
	x7 := binary.LittleEndian.Uint32(p[28:])
	x8 := binary.LittleEndian.Uint32(p[32:])
	x9 := binary.LittleEndian.Uint32(p[36:])
	x10 := binary.LittleEndian.Uint32(p[40:])
	x11 := binary.LittleEndian.Uint32(p[44:])
	x12 := binary.LittleEndian.Uint32(p[48:])
	x13 := binary.LittleEndian.Uint32(p[52:])
	x14 := binary.LittleEndian.Uint32(p[56:])
	x15 := binary.LittleEndian.Uint32(p[60:])
	a, b, c, d := a0, b0, c0, d0
	a = b + bits.RotateLeft32(a+(d^(b&(c^d)))+x0+0xd76aa478, 7)
	d = a + bits.RotateLeft32(d+(c^(a&(b^c)))+x1+0xe8c7b756, 12)
	c = d + bits.RotateLeft32(c+(b^(d&(a^b)))+x2+0x242070db, 17)
	b = c + bits.RotateLeft32(b+(a^(c&(d^a)))+x3+0xc1bdceee, 22)
	a = b + bits.RotateLeft32(a+(d^(b&(c^d)))+x4+0xf57c0faf, 7)
	d = a + bits.RotateLeft32(d+(c^(a&(b^c)))+x5+0x4787c62a, 12)
	c = d + bits.RotateLeft32(c+(b^(d&(a^b)))+x6+0xa8304613, 17)
	b = c + bits.RotateLeft32(b+(a^(c&(d^a)))+x7+0xfd469501, 22)
	a = b + bits.RotateLeft32(a+(d^(b&(c^d)))+x8+0x698098d8, 7)
	d = a + bits.RotateLeft32(d+(c^(a&(b^c)))+x9+0x8b44f7af, 12)
	c = d + bits.RotateLeft32(c+(b^(d&(a^b)))+x10+0xffff5bb1, 17)
	b = c + bits.RotateLeft32(b+(a^(c&(d^a)))+x11+0x895cd7be, 22)
	a = b + bits.RotateLeft32(a+(d^(b&(c^d)))+x12+0x6b901122, 7)
	d = a + bits.RotateLeft32(d+(c^(a&(b^c)))+x13+0xfd987193, 12)
	c = d + bits.RotateLeft32(c+(b^(d&(a^b)))+x14+0xa679438e, 17)
	b = c + bits.RotateLeft32(b+(a^(c&(d^a)))+x15+0x49b40821, 22)
	a = b + bits.RotateLeft32(a+(c^(d&(b^c)))+x1+0xf61e2562, 5)
	d = a + bits.RotateLeft32(d+(b^(c&(a^b)))+x6+0xc040b340, 9)
	c = d + bits.RotateLeft32(c+(a^(b&(d^a)))+x11+0x265e5a51, 14)
	b = c + bits.RotateLeft32(b+(d^(a&(c^d)))+x0+0xe9b6c7aa, 20)
	a = b + bits.RotateLeft32(a+(c^(d&(b^c)))+x5+0xd62f105d, 5)
	d = a + bits.RotateLeft32(d+(b^(c&(a^b)))+x10+0x02441453, 9)
	c = d + bits.RotateLeft32(c+(a^(b&(d^a)))+x15+0xd8a1e681, 14)
	b = c + bits.RotateLeft32(b+(d^(a&(c^d)))+x4+0xe7d3fbc8, 20)
	a = b + bits.RotateLeft32(a+(c^(d&(b^c)))+x9+0x21e1cde6, 5)
	d = a + bits.RotateLeft32(d+(b^(c&(a^b)))+x14+0xc33707d6, 9)
	c = d + bits.RotateLeft32(c+(a^(b&(d^a)))+x3+0xf4d50d87, 14)
	b = c + bits.RotateLeft32(b+(d^(a&(c^d)))+x8+0x455a14ed, 20)
	a = b + bits.RotateLeft32(a+(c^(d&(b^c)))+x13+0xa9e3e905, 5)
	d = a + bits.RotateLeft32(d+(b^(c&(a^b)))+x2+0xfcefa3f8, 9)
	c = d + bits.RotateLeft32(c+(a^(b&(d^a)))+x7+0x676f02d9, 14)
	b = c + bits.RotateLeft32(b+(d^(a&(c^d)))+x12+0x8d2a4c8a, 20)
	a = b + bits.RotateLeft32(a+(b^c^d)+x5+0xfffa3942, 4)
	d = a + bits.RotateLeft32(d+(a^b^c)+x8+0x8771f681, 11)
	c = d + bits.RotateLeft32(c+(d^a^b)+x11+0x6d9d6122, 16)
	b = c + bits.RotateLeft32(b+(c^d^a)+x14+0xfde5380c, 23)
	a = b + bits.RotateLeft32(a+(b^c^d)+x1+0xa4beea44, 4)
	d = a + bits.RotateLeft32(d+(a^b^c)+x4+0x4bdecfa9, 11)
	c = d + bits.RotateLeft32(c+(d^a^b)+x7+0xf6bb4b60, 16)
	b = c + bits.RotateLeft32(b+(c^d^a)+x10+0xbebfbc70, 23)
	a = b + bits.RotateLeft32(a+(b^c^d)+x13+0x289b7ec6, 4)
	d = a + bits.RotateLeft32(d+(a^b^c)+x0+0xeaa127fa, 11)
	c = d + bits.RotateLeft32(c+(d^a^b)+x3+0xd4ef3085, 16)
	b = c + bits.RotateLeft32(b+(c^d^a)+x6+0x04881d05, 23)
	a = b + bits.RotateLeft32(a+(b^c^d)+x9+0xd9d4d039, 4)
	d = a + bits.RotateLeft32(d+(a^b^c)+x12+0xe6db99e5, 11)
	c = d + bits.RotateLeft32(c+(d^a^b)+x15+0x1fa27cf8, 16)
	b = c + bits.RotateLeft32(b+(c^d^a)+x2+0xc4ac5665, 23)
	a = b + bits.RotateLeft32(a+(c^(b|^d))+x0+0xf4292244, 6)
	d = a + bits.RotateLeft32(d+(b^(a|^c))+x7+0x432aff97, 10)
	c = d + bits.RotateLeft32(c+(a^(d|^b))+x14+0xab9423a7, 15)
	b = c + bits.RotateLeft32(b+(d^(c|^a))+x5+0xfc93a039, 21)
	a = b + bits.RotateLeft32(a+(c^(b|^d))+x12+0x655b59c3, 6)
	d = a + bits.RotateLeft32(d+(b^(a|^c))+x3+0x8f0ccc92, 10)
	c = d + bits.RotateLeft32(c+(a^(d|^b))+x10+0xffeff47d, 15)
	b = c + bits.RotateLeft32(b+(d^(c|^a))+x1+0x85845dd1, 21)
	a = b + bits.RotateLeft32(a+(c^(b|^d))+x8+0x6fa87e4f, 6)
	d = a + bits.RotateLeft32(d+(b^(a|^c))+x15+0xfe2ce6e0, 10)
	c = d + bits.RotateLeft32(c+(a^(d|^b))+x6+0xa3014314, 15)
	b = c + bits.RotateLeft32(b+(d^(c|^a))+x13+0x4e0811a1, 21)
	a = b + bits.RotateLeft32(a+(c^(b|^d))+x4+0xf7537e82, 6)
	d = a + bits.RotateLeft32(d+(b^(a|^c))+x11+0xbd3af235, 10)
	c = d + bits.RotateLeft32(c+(a^(d|^b))+x2+0x2ad7d2bb, 15)
	b = c + bits.RotateLeft32(b+(d^(c|^a))+x9+0xeb86d391, 21)
	return a0 + a, b0 + b, c0 + c, d0 + d
}
