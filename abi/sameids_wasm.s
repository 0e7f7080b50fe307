//go:build !tinygo

#include "textflag.h"

// func sameIDs(consumers, offs, blob []byte, ids []string) bool
//
// Whether the string ids in consumers name the strings of ids, in order. A consumer's string is
// blob[offs[id]:offs[id+1]], both offsets read as one 8-byte word (the View checked the ids and
// the offsets when it parsed them). A pair of one length is compared eight bytes at a time, the
// last eight of a string of eight bytes or more read again where they overlap the words before,
// and a shorter one byte by byte, as hash's sameStrings compares two lists.
//
// Registers: R0 the next consumer id's place, R1 the end of consumers, R2 offs, R3 blob, R4 the
// next string header of ids, R5 and R6 the next bytes of the pair at hand, R7 how many are left,
// R8 the pair's length, R9 the answer.
TEXT ·sameIDs(SB), NOSPLIT, $0-97
	I64Const $0
	Set R9
	Block // leaving it answers R9
	I64Load consumers_len+8(FP); I64Const $2; I64ShrU
	I64Load ids_len+80(FP)
	I64Ne
	BrIf $0
	I64Load consumers_base+0(FP)
	Set R0
	Get R0; I64Load ids_len+80(FP); I64Const $2; I64Shl; I64Add; Set R1
	I64Load offs_base+24(FP)
	Set R2
	I64Load blob_base+48(FP)
	Set R3
	I64Load ids_base+72(FP)
	Set R4

	Loop // a consumer
	Get R0; Get R1; I64GeU
	If
	I64Const $1; Set R9
	Br $2
	End
	Get R0; I32WrapI64; I64Load32U $0; I64Const $2; I64Shl; Get R2; I64Add; I32WrapI64; I64Load $0; Set R5
	Get R5; I64Const $32; I64ShrU; Get R5; I64Const $0xffffffff; I64And; I64Sub; Set R8
	Get R4; I32WrapI64; I64Load $8; Get R8; I64Ne; BrIf $1 // lengths differ
	Get R5; I64Const $0xffffffff; I64And; Get R3; I64Add; Set R5
	Get R4; I32WrapI64; I64Load $0; Set R6
	Get R8; Set R7
	Get R0; I64Const $4; I64Add; Set R0
	Get R4; I64Const $16; I64Add; Set R4

	Block // the words
	Loop
	Get R7; I64Const $8; I64LtU; BrIf $1
	Get R5; I32WrapI64; I64Load $0; Get R6; I32WrapI64; I64Load $0; I64Ne; BrIf $3
	Get R5; I64Const $8; I64Add; Set R5
	Get R6; I64Const $8; I64Add; Set R6
	Get R7; I64Const $8; I64Sub; Set R7
	Br $0
	End
	End

	Get R7; I64Eqz; BrIf $0 // no bytes left: the next pair
	Get R8; I64Const $8; I64GeU
	If // the last eight bytes, partly compared already
	Get R5; Get R7; I64Add; I64Const $8; I64Sub; I32WrapI64; I64Load $0
	Get R6; Get R7; I64Add; I64Const $8; I64Sub; I32WrapI64; I64Load $0
	I64Ne; BrIf $2
	Br $1
	End

	Block // a string of under eight bytes, byte by byte
	Loop
	Get R7; I64Eqz; BrIf $1
	Get R5; I32WrapI64; I64Load8U $0; Get R6; I32WrapI64; I64Load8U $0; I64Ne; BrIf $3
	Get R5; I64Const $1; I64Add; Set R5
	Get R6; I64Const $1; I64Add; Set R6
	Get R7; I64Const $1; I64Sub; Set R7
	Br $0
	End
	End
	Br $0
	End
	End

	Get SP
	Get R9
	I64Store8 ret+96(FP)
	RET
