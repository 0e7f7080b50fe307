//go:build !wasm

package hash

import (
	"encoding/binary"
	"math/bits"
)

// md5Blocks runs the compression function over each whole 64-byte block of p, in order, from
// the state a0, b0, c0, d0: the Go that md5block_wasm.s is in the wasm guest.
func md5Blocks(a0, b0, c0, d0 uint32, p []byte) (a, b, c, d uint32) {
	for ; len(p) >= 64; p = p[64:] {
		a0, b0, c0, d0 = md5Block(a0, b0, c0, d0, p[:64:64])
	}
	return a0, b0, c0, d0
}

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

// md5Sums sets out[k] to p.sum(vs[k], byte(closing)) for each k: the Go that md5block_wasm.s
// is in the wasm guest.
func md5Sums(p *prefixMD5, vs []uint32, closing uint32, out []uint32) {
	for k, v := range vs {
		out[k] = p.sum(v, byte(closing))
	}
}
