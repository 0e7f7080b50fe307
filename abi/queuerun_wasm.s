//go:build !tinygo

#include "textflag.h"

// func runIDs(q []byte, names uint64, ids []int32) int
//
// Writes to ids the queue ids of the 12-byte queue records at the start of q whose first 8 bytes
// (topic and broker) are names, up to the first that is not or the end of q or of ids, and
// returns how many it wrote. Four records a step while four whole records and four places are
// left and all four match, then one a step to find where the run ends. A step's reads are made
// off one address in PC_B (the resumption index Go's wasm passes a function, which this one,
// with no calls, does not read), and its writes off another, the farthest first: the runtime
// checks the bounds of accesses off one unchanged value once, at the first (RATIONALE.md, "Why
// runIDs takes four records a step").
//
// Registers: R0 the next record, R1 the last place a whole record starts, R2 names, R3 the next
// of ids and R4 its start, R5 the end of ids, R6-R9 the step's queue ids.
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

	// four records a step
	Block
	Loop
	Get R0; I64Const $36; I64Add; Get R1; I64GtS; BrIf $1
	Get R3; I64Const $16; I64Add; Get R5; I64GtU; BrIf $1
	Get R0; I32WrapI64; Set PC_B
	Get PC_B; I64Load32U $44; Set R9
	Get PC_B; I64Load $0; Get R2; I64Ne
	Get PC_B; I64Load $12; Get R2; I64Ne; I32Or
	Get PC_B; I64Load $24; Get R2; I64Ne; I32Or
	Get PC_B; I64Load $36; Get R2; I64Ne; I32Or
	BrIf $1
	Get PC_B; I64Load32U $8; Set R6
	Get PC_B; I64Load32U $20; Set R7
	Get PC_B; I64Load32U $32; Set R8
	Get R3; I32WrapI64; Set PC_B
	Get PC_B; Get R8; Get R9; I64Const $32; I64Shl; I64Or; I64Store $8
	Get PC_B; Get R6; Get R7; I64Const $32; I64Shl; I64Or; I64Store $0
	Get R0; I64Const $48; I64Add; Set R0
	Get R3; I64Const $16; I64Add; Set R3
	Br $0
	End
	End

	// one record a step, to the run's end
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
