#include "go_asm.h"
#include "textflag.h"

// MEMO_ARGS loads memoPut's first arguments, known, ids and hs: R0 and R1
// known's base and length, R2 and R3 the start and the end of ids, R4 the start of hs.
#define MEMO_ARGS \
	I64Load known_base+0(FP); Set R0; \
	I64Load known_len+8(FP); Set R1; \
	I64Load ids_base+24(FP); Set R2; \
	Get R2; I64Load ids_len+32(FP); I64Const $2; I64Shl; I64Add; Set R3; \
	I64Load hs_base+48(FP); Set R4

// RING_FIELDS loads the fields of the first argument, r *Ring, that a search reads: R0 r's
// hashes, R1 their count, R2 r's nodes, R3 r's buckets, R4 r's shift.
#define RING_FIELDS \
	I64Load r+0(FP); I32WrapI64; Set PC_B; \
	Get PC_B; I64Load $Ring_hashes; Set R0; \
	Get PC_B; I64Load $(Ring_hashes+8); Set R1; \
	Get PC_B; I64Load $Ring_nodes; Set R2; \
	Get PC_B; I64Load $Ring_buckets; Set R3; \
	Get PC_B; I64Load $Ring_shift; Set R4

// RING_SEARCH stores at the address in R7 the node of the first ring hash >= the hash in R8,
// past the last one the first node (r's fields as RING_FIELDS loads them), as hash.go's lookup:
// the bucket of the hash (its top bits, buckets[h>>shift] to buckets[h>>shift+1]) bounds a
// binary search in R9 and R10 (i and j), R11 their middle. Its step is branch-free: whether
// hashes[m] < h, kept in PC_B (the resumption index Go's wasm passes a function, which one with
// no calls does not read), selects i = m+1 or j = m.
#define RING_SEARCH \
	Get R8; Get R4; I64ShrU; I64Const $2; I64Shl; Get R3; I64Add; I32WrapI64; Set PC_B; \
	Get PC_B; I64Load32U $4; Set R10; \
	Get PC_B; I64Load32U $0; Set R9; \
	Block; \
	Loop; \
	Get R9; Get R10; I64GeU; BrIf $1; \
	Get R9; Get R10; I64Add; I64Const $1; I64ShrU; Set R11; \
	Get R11; I64Const $2; I64Shl; Get R0; I64Add; I32WrapI64; I64Load32U $0; Get R8; I64LtU; Set PC_B; \
	Get R11; I64Const $1; I64Add; Get R9; Get PC_B; Select; Set R9; \
	Get R10; Get R11; Get PC_B; Select; Set R10; \
	Br $0; \
	End; \
	End; \
	Get R7; I32WrapI64; \
	I64Const $0; Get R9; Get R9; Get R1; I64Eq; Select; \
	I64Const $2; I64Shl; Get R2; I64Add; I32WrapI64; I64Load32U $0; \
	I64Store32 $0

// func ringLookups(r *Ring, hs []uint32, out []int32)
//
// out[j] = r.lookup(hs[j]) for each j (len(out) >= len(hs), r's ring not empty), by
// RING_SEARCH.
//
// Registers: R0 r's hashes, R1 their count, R2 r's nodes, R3 r's buckets, R4 r's shift, R5 and
// R6 the next and the end of hs, R7 the next of out, R8 h, R9 and R10 the search's bounds, R11
// its middle.
TEXT ·ringLookups(SB), NOSPLIT, $0-56
	RING_FIELDS
	I64Load hs_base+8(FP)
	Set R5
	Get R5; I64Load hs_len+16(FP); I64Const $2; I64Shl; I64Add; Set R6
	I64Load out_base+32(FP)
	Set R7

	Block
	Loop
	Get R5; Get R6; I64GeU; BrIf $1
	Get R5; I32WrapI64; I64Load32U $0; Set R8

	RING_SEARCH

	Get R5; I64Const $4; I64Add; Set R5
	Get R7; I64Const $4; I64Add; Set R7
	Br $0
	End
	End
	RET

// func memoPut(known []uint64, ids []int32, hs []uint32) int
//
// For each k with ids[k] an index of known, known[ids[k]] = 1<<32 | hs[k] (len(hs) >=
// len(ids)). Returns how many of those entries were 0 before.
//
// Registers: R0 and R1 known's base and length, R2 and R3 the next and the end of ids, R4 the
// next of hs, R5 the count, R6 the id, R7 its entry's address.
TEXT ·memoPut(SB), NOSPLIT, $0-80
	MEMO_ARGS
	I64Const $0; Set R5

	Block
	Loop
	Get R2; Get R3; I64GeU; BrIf $1
	Get R2; I32WrapI64; I64Load32U $0; Set R6
	Block
	Get R6; Get R1; I64LtU; I32Eqz; BrIf $0
	Get R6; I64Const $3; I64Shl; Get R0; I64Add; Set R7
	// the count of entries that were 0
	Get R5; Get R7; I32WrapI64; I64Load $0; I64Eqz; I64ExtendI32U; I64Add; Set R5
	Get R7; I32WrapI64
	Get R4; I32WrapI64; I64Load32U $0; I64Const $0x100000000; I64Or
	I64Store $0
	End
	Get R2; I64Const $4; I64Add; Set R2
	Get R4; I64Const $4; I64Add; Set R4
	Br $0
	End
	End

	Get SP
	Get R5
	I64Store ret+72(FP)
	RET

// func sameStrings(a, b []string) bool
//
// Whether a and b hold the same strings, in order (slices.Equal): a pair with one address is
// equal without a look at its bytes; any other pair of one length is compared eight bytes at a
// time, the last eight of a string of eight bytes or more read again where they overlap the
// words before, and a shorter one byte by byte. Go's own comparison reads a byte at a time in
// the guest, about 45 instructions a byte.
//
// Registers: R0 and R1 a's and b's next string header, R2 the end of a's, R3 and R4 the next
// bytes of the pair at hand, R5 how many are left, R6 the pair's length, R7 the answer.
TEXT ·sameStrings(SB), NOSPLIT, $0-49
	I64Const $0
	Set R7
	Block // leaving it answers R7
	I64Load a_len+8(FP)
	I64Load b_len+32(FP)
	I64Ne
	BrIf $0
	I64Load a_base+0(FP)
	Set R0
	I64Load b_base+24(FP)
	Set R1
	Get R0; I64Load a_len+8(FP); I64Const $4; I64Shl; I64Add; Set R2

	Loop // a pair of strings
	Get R0; Get R2; I64GeU
	If
	I64Const $1; Set R7
	Br $2
	End
	Get R0; I32WrapI64; I64Load $8; Set R6
	Get R1; I32WrapI64; I64Load $8; Get R6; I64Ne; BrIf $1 // lengths differ
	Get R0; I32WrapI64; I64Load $0; Set R3
	Get R1; I32WrapI64; I64Load $0; Set R4
	Get R6; Set R5
	Get R0; I64Const $16; I64Add; Set R0
	Get R1; I64Const $16; I64Add; Set R1
	Get R3; Get R4; I64Eq; BrIf $0 // one address: the same bytes

	Block // the words
	Loop
	Get R5; I64Const $8; I64LtU; BrIf $1
	Get R3; I32WrapI64; I64Load $0; Get R4; I32WrapI64; I64Load $0; I64Ne; BrIf $3
	Get R3; I64Const $8; I64Add; Set R3
	Get R4; I64Const $8; I64Add; Set R4
	Get R5; I64Const $8; I64Sub; Set R5
	Br $0
	End
	End

	Get R5; I64Eqz; BrIf $0 // no bytes left: the next pair
	Get R6; I64Const $8; I64GeU
	If // the last eight bytes, partly compared already
	Get R3; Get R5; I64Add; I64Const $8; I64Sub; I32WrapI64; I64Load $0
	Get R4; Get R5; I64Add; I64Const $8; I64Sub; I32WrapI64; I64Load $0
	I64Ne; BrIf $2
	Br $1
	End

	Block // a string of under eight bytes, byte by byte
	Loop
	Get R5; I64Eqz; BrIf $1
	Get R3; I32WrapI64; I64Load8U $0; Get R4; I32WrapI64; I64Load8U $0; I64Ne; BrIf $3
	Get R3; I64Const $1; I64Add; Set R3
	Get R4; I64Const $1; I64Add; Set R4
	Get R5; I64Const $1; I64Sub; Set R5
	Br $0
	End
	End
	Br $0
	End
	End

	Get SP
	Get R7
	I64Store8 ret+48(FP)
	RET

// func memoLookups(r *Ring, known []uint64, ids []int32, out []int32, miss []int32) int
//
// For each k whose ids[k] is an index of known with an entry not 0 (a memo's 1<<32 | hash),
// out[k] = r.lookup(the entry's hash) by RING_SEARCH; otherwise k is appended to
// miss (len(out), len(miss) >= len(ids); r's ring not empty). Returns how many it appended. A
// queue's hash goes from the memo to the search in one loop, not stored by one and read back by
// another.
//
// Registers: R0 r's hashes, R1 their count, R2 r's nodes, R3 r's buckets, R4 r's shift, R5 and
// R6 the next and the end of ids, R7 the next of out, R8 the id, then its entry, then its hash,
// R9 and R10 the search's bounds, R11 its middle, R12 and R13 known's base and length, R14 the
// next of miss, R15 k.
//
// A looked-up queue and a miss each advance R5, R7 and R15 and branch back on their own: joined
// after an enclosing block instead, hash's same group again counted 366k instructions a call
// against 348-350k (callgrind, N=1000, two runs each).
TEXT ·memoLookups(SB), NOSPLIT, $0-112
	RING_FIELDS
	I64Load known_base+8(FP)
	Set R12
	I64Load known_len+16(FP)
	Set R13
	I64Load ids_base+32(FP)
	Set R5
	Get R5; I64Load ids_len+40(FP); I64Const $2; I64Shl; I64Add; Set R6
	I64Load out_base+56(FP)
	Set R7
	I64Load miss_base+80(FP)
	Set R14
	I64Const $0; Set R15

	Block
	Loop
	Get R5; Get R6; I64GeU; BrIf $1
	Get R5; I32WrapI64; I64Load32U $0; Set R8

	Block // a miss leaves it
	Get R8; Get R13; I64LtU; I32Eqz; BrIf $0
	Get R8; I64Const $3; I64Shl; Get R12; I64Add; I32WrapI64; I64Load $0; Set R8
	Get R8; I64Eqz; BrIf $0
	Get R8; I64Const $0xffffffff; I64And; Set R8

	RING_SEARCH

	Get R5; I64Const $4; I64Add; Set R5
	Get R7; I64Const $4; I64Add; Set R7
	Get R15; I64Const $1; I64Add; Set R15
	Br $1
	End

	// a miss: k to miss
	Get R14; I32WrapI64; Get R15; I64Store32 $0
	Get R14; I64Const $4; I64Add; Set R14
	Get R5; I64Const $4; I64Add; Set R5
	Get R7; I64Const $4; I64Add; Set R7
	Get R15; I64Const $1; I64Add; Set R15
	Br $0
	End
	End

	Get SP
	Get R14; I64Load miss_base+80(FP); I64Sub; I64Const $2; I64ShrU
	I64Store ret+104(FP)
	RET
