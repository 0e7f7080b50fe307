//go:build !tinygo

#include "textflag.h"

// func runIDs(q []byte, names uint64, ids []int32) int
//
// Writes to ids the queue ids of the 12-byte queue records at the start of q whose first 8 bytes
// (topic and broker) are names, up to the first that is not or the end of q or of ids, and
// returns how many it wrote. A record's words are read off its address in PC_B (the resumption
// index Go's wasm passes a function, which this one, with no calls, does not read), the highest
// first: the runtime checks the bounds of reads off one unchanged value once, at the first.
//
// Registers: R0 the next record, R1 the last place a whole record starts, R2 names, R3 the next
// of ids and R4 its start, R5 the end of ids, R6 the record's queue id.
TEXT ·runIDs(SB), NOSPLIT, $0-64
	I64Load q_base+0(FP)
	Set R0
	Get R0; I64Load q_len+8(FP); I64Add; I64Const $12; I64Sub; Set R1
	I64Load names+24(FP)
	Set R2
	I64Load ids_base+32(FP)
	Set R3
	Get R3; Set R4
	Get R3; I64Load ids_len+40(FP); I64Const $2; I64Shl; I64Add; Set R5

	Block
	Loop
	Get R0; Get R1; I64GtS; BrIf $1
	Get R3; Get R5; I64GeU; BrIf $1
	Get R0; I32WrapI64; Set PC_B
	Get PC_B; I64Load32U $8; Set R6
	Get PC_B; I64Load $0; Get R2; I64Ne; BrIf $1
	Get R3; I32WrapI64; Get R6; I64Store32 $0
	Get R0; I64Const $12; I64Add; Set R0
	Get R3; I64Const $4; I64Add; Set R3
	Br $0
	End
	End

	Get SP
	Get R3; Get R4; I64Sub; I64Const $2; I64ShrU
	I64Store ret+56(FP)
	RET
