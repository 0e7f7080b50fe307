#include "go_asm.h"
#include "textflag.h"

// MEMO_ARGS loads memoHashes' and memoPut's first arguments, known, ids and hs: R0 and R1
// known's base and length, R2 and R3 the start and the end of ids, R4 the start of hs.
#define MEMO_ARGS \
	I64Load known_base+0(FP); Set R0; \
	I64Load known_len+8(FP); Set R1; \
	I64Load ids_base+24(FP); Set R2; \
	Get R2; I64Load ids_len+32(FP); I64Const $2; I64Shl; I64Add; Set R3; \
	I64Load hs_base+48(FP); Set R4

// func ringLookups(r *Ring, hs []uint32, out []int32)
//
// out[j] = r.lookup(hs[j]) for each j (len(out) >= len(hs), r's ring not empty), as hash.go's
// lookup: the bucket of h (its top bits) bounds a binary search for the first ring hash >= h,
// past the last one wrapping to the first. The search's step is branch-free: the comparison,
// kept in PC_B (the resumption index Go's wasm passes a function, which this one, with no
// calls, does not read), selects the new bounds.
//
// Registers: R0 r's hashes, R1 their count, R2 r's nodes, R3 r's buckets, R4 r's shift, R5 and
// R6 the next and the end of hs, R7 the next of out, R8 h, R9 and R10 the search's bounds, R11
// its middle.
TEXT ·ringLookups(SB), NOSPLIT, $0-56
	I64Load r+0(FP)
	I32WrapI64
	Set PC_B
	Get PC_B; I64Load $Ring_hashes; Set R0
	Get PC_B; I64Load $(Ring_hashes+8); Set R1
	Get PC_B; I64Load $Ring_nodes; Set R2
	Get PC_B; I64Load $Ring_buckets; Set R3
	Get PC_B; I64Load $Ring_shift; Set R4
	I64Load hs_base+8(FP)
	Set R5
	Get R5; I64Load hs_len+16(FP); I64Const $2; I64Shl; I64Add; Set R6
	I64Load out_base+32(FP)
	Set R7

	Block
	Loop
	Get R5; Get R6; I64GeU; BrIf $1
	Get R5; I32WrapI64; I64Load32U $0; Set R8

	// the bucket's bounds: buckets[h>>shift], buckets[h>>shift+1]
	Get R8; Get R4; I64ShrU; I64Const $2; I64Shl; Get R3; I64Add; I32WrapI64; Set PC_B
	Get PC_B; I64Load32U $4; Set R10
	Get PC_B; I64Load32U $0; Set R9

	Block
	Loop
	Get R9; Get R10; I64GeU; BrIf $1
	Get R9; Get R10; I64Add; I64Const $1; I64ShrU; Set R11
	// hashes[m] < h: i = m+1, else j = m
	Get R11; I64Const $2; I64Shl; Get R0; I64Add; I32WrapI64; I64Load32U $0; Get R8; I64LtU; Set PC_B
	Get R11; I64Const $1; I64Add; Get R9; Get PC_B; Select; Set R9
	Get R10; Get R11; Get PC_B; Select; Set R10
	Br $0
	End
	End

	// out: nodes[i], nodes[0] past the last hash
	Get R7; I32WrapI64
	I64Const $0; Get R9; Get R9; Get R1; I64Eq; Select
	I64Const $2; I64Shl; Get R2; I64Add; I32WrapI64; I64Load32U $0
	I64Store32 $0

	Get R5; I64Const $4; I64Add; Set R5
	Get R7; I64Const $4; I64Add; Set R7
	Br $0
	End
	End
	RET

// func memoHashes(known []uint64, ids []int32, hs []uint32, miss []int32) int
//
// For each k, hs[k] = uint32(known[ids[k]]) when ids[k] is an index of known and that entry is
// not 0 (a memo's 1<<32 | hash); otherwise k is appended to miss (len(miss), len(hs) >=
// len(ids)). Returns how many were appended.
//
// Registers: R0 and R1 known's base and length, R2 and R3 the next and the end of ids, R4 hs,
// R5 miss, R6 k, R7 the count, R8 the id, R9 its entry.
TEXT ·memoHashes(SB), NOSPLIT, $0-104
	MEMO_ARGS
	I64Load miss_base+72(FP)
	Set R5
	I64Const $0; Set R6
	I64Const $0; Set R7

	Block
	Loop
	Get R2; Get R3; I64GeU; BrIf $1
	Get R2; I32WrapI64; I64Load32U $0; Set R8
	Block
	// out of known, or 0: a miss
	Get R8; Get R1; I64LtU; I32Eqz; BrIf $0
	Get R8; I64Const $3; I64Shl; Get R0; I64Add; I32WrapI64; I64Load $0; Set R9
	Get R9; I64Eqz; BrIf $0
	Get R6; I64Const $2; I64Shl; Get R4; I64Add; I32WrapI64; Get R9; I64Store32 $0
	Get R2; I64Const $4; I64Add; Set R2
	Get R6; I64Const $1; I64Add; Set R6
	Br $1
	End
	Get R7; I64Const $2; I64Shl; Get R5; I64Add; I32WrapI64; Get R6; I64Store32 $0
	Get R7; I64Const $1; I64Add; Set R7
	Get R2; I64Const $4; I64Add; Set R2
	Get R6; I64Const $1; I64Add; Set R6
	Br $0
	End
	End

	Get SP
	Get R7
	I64Store ret+96(FP)
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
