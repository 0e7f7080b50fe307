//go:build !tinygo

#include "textflag.h"

// func fillBlocks(owners []int32, c int)
//
// Blocks as in owners_other.go: size is len(owners)/c and bigger len(owners)%c; the first bigger
// consumers' blocks are size+1 entries long, the others size. A block is written 16 entries at a
// time from its start with eight 8-byte stores (CHUNK), its last chunk running over into the
// blocks after it, which are written later; a chunk that would run past the end of owners is
// written an entry at a time instead.
//
// wazero keeps few values in registers across a loop's back edge, and the host counts every loop
// head it runs (the deadline's loopcheck), so blocks of up to 16 entries, the usual case, go four
// to an iteration (FOUR), first the bigger ones and then the others; the rest, one block an
// iteration. A chunk's stores go through one unchanged address in PC_B (the resumption index
// Go's wasm passes a function, which this one, with no calls, does not read), the highest first:
// the runtime checks the bounds of stores off one value once, at the first.
//
// Registers: R0 the address being written, R1 the end of consumer k's block, R2 two entries of k
// (k | k<<32), R3 k, R4 the end of owners, R5 size*4, R6 bigger, R7 c, R8 a block's length in
// bytes and R9 the consumer after the last of that length (FOUR), R10 a chunk's address.

// CHUNK writes two entries of v to each 8-byte store of the 64 bytes from address a.
#define CHUNK(a, v) \
	Get a; I32WrapI64; Set PC_B; \
	Get PC_B; Get v; I64Store $56; \
	Get PC_B; Get v; I64Store $0; \
	Get PC_B; Get v; I64Store $8; \
	Get PC_B; Get v; I64Store $16; \
	Get PC_B; Get v; I64Store $24; \
	Get PC_B; Get v; I64Store $32; \
	Get PC_B; Get v; I64Store $40; \
	Get PC_B; Get v; I64Store $48

// NEXT moves R10 one block (R8 bytes) on and R2 to the next consumer's entries.
#define NEXT \
	Get R10; Get R8; I64Add; Set R10; \
	Get R2; I64Const $0x100000001; I64Add; Set R2

// FOUR writes the blocks of R8 bytes (0 < R8 <= 64) of consumers R3 on, four an iteration, while
// four more are below consumer R9 and the fourth's chunk ends within owners.
#define FOUR \
	Get R8; I64Const $64; I64LeU; Get R8; I64Eqz; I32Eqz; I32And; \
	If; \
	Block; \
	Loop; \
	Get R3; I64Const $4; I64Add; Get R9; I64GtU; BrIf $1; \
	Get R0; Get R8; I64Const $3; I64Mul; I64Add; I64Const $64; I64Add; Get R4; I64GtU; BrIf $1; \
	Get R3; Get R3; I64Const $32; I64Shl; I64Or; Set R2; \
	Get R0; Set R10; \
	CHUNK(R10, R2); NEXT; CHUNK(R10, R2); NEXT; CHUNK(R10, R2); NEXT; CHUNK(R10, R2); \
	Get R10; Get R8; I64Add; Set R0; \
	Get R3; I64Const $4; I64Add; Set R3; \
	Br $0; \
	End; \
	End; \
	End

TEXT ·fillBlocks(SB), NOSPLIT, $0-32
	I64Load c+24(FP) // the highest first: one bounds check off SP
	Set R7
	I64Load owners_len+8(FP)
	Get R7
	I64RemU
	Set R6
	I64Load owners_len+8(FP)
	Get R7
	I64DivU
	I64Const $2
	I64Shl
	Set R5
	I64Load owners_base+0(FP)
	Set R0
	I64Load owners_len+8(FP)
	I64Const $2
	I64Shl
	Get R0
	I64Add
	Set R4
	I64Const $0
	Set R3

	// The bigger blocks, four at a time; then, if they are all written, the others.
	Get R5
	I64Const $4
	I64Add
	Set R8
	Get R6
	Set R9
	FOUR
	Get R3
	Get R6
	I64GeU
	If
	Get R5
	Set R8
	Get R7
	Set R9
	FOUR
	End

	// The rest, a block an iteration.
	Block
	Loop
	// Every entry written: done.
	Get R0
	Get R4
	I64GeU
	BrIf $1
	// R1 = R0 + size*4, one entry more for the first bigger consumers; R2 = k | k<<32.
	Get R0
	Get R5
	I64Add
	Get R3
	Get R6
	I64LtS
	I64ExtendI32U
	I64Const $2
	I64Shl
	I64Add
	Set R1
	Get R3
	Get R3
	I64Const $32
	I64Shl
	I64Or
	Set R2

	Block
	Loop
	// A chunk that would run past the end of owners: the rest of the block an entry at a time.
	Get R0
	I64Const $64
	I64Add
	Get R4
	I64GtU
	BrIf $1
	CHUNK(R0, R2)
	Get R0
	I64Const $64
	I64Add
	Set R0
	Get R0
	Get R1
	I64LtU
	BrIf $0
	End
	// The block is written (and maybe some of the next): on to the next consumer's.
	Get R1
	Set R0
	Get R3
	I64Const $1
	I64Add
	Set R3
	Br $1
	End

	// The rest of the block, an entry at a time.
	Block
	Loop
	Get R0
	Get R1
	I64GeU
	BrIf $1
	Get R0
	I32WrapI64
	Get R3
	I64Store32 $0
	Get R0
	I64Const $4
	I64Add
	Set R0
	Br $0
	End
	End
	Get R3
	I64Const $1
	I64Add
	Set R3
	Br $0
	End
	End
	RET
