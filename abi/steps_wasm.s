//go:build !tinygo

#include "textflag.h"

// func steps(b []byte, prev int64) (or, orLess1, last int64)
//
// steps in WebAssembly for the wasm guest, where Go's code pays a trip through its function's
// dispatch table for every loop iteration and some eight instructions for every load
// (RATIONALE.md). Registers: R0 the address being read, R1 the end of b's whole values, R2 the
// last value, R3 or, R4 orLess1, R5 a value, R6 its step, R7 the eighth value of a group. Eight
// values an iteration, read through one unchanged address in PC_B (the resumption index Go's
// wasm passes a function, which this one, with no calls, does not read), the highest first: the
// runtime checks the bounds of reads off one value once, at the first.

// STEP takes the value on the stack as the next: its step from R2 ORed into R3, the step less
// one into R4, and the value into R2.
#define STEP \
	Set R5; \
	Get R5; Get R2; I64Sub; Set R6; \
	Get R3; Get R6; I64Or; Set R3; \
	Get R4; Get R6; I64Const $1; I64Sub; I64Or; Set R4; \
	Get R5; Set R2

// AT reads the value at offset off of the group at PC_B.
#define AT(off) Get PC_B; I64Load32U off

TEXT ·steps(SB), NOSPLIT, $0-56
	I64Load prev+24(FP) // the highest argument first: one bounds check off SP
	Set R2
	I64Load b_base+0(FP)
	Set R0
	I64Load b_len+8(FP)
	I64Const $-4
	I64And
	Get R0
	I64Add
	Set R1
	I64Const $0
	Set R3
	I64Const $0
	Set R4

	Block
	Loop
	Get R0
	I64Const $32
	I64Add
	Get R1
	I64GtU
	BrIf $1
	Get R0
	I32WrapI64
	Set PC_B
	AT($28)
	Set R7
	AT($0); STEP
	AT($4); STEP
	AT($8); STEP
	AT($12); STEP
	AT($16); STEP
	AT($20); STEP
	AT($24); STEP
	Get R7; STEP
	Get R0
	I64Const $32
	I64Add
	Set R0
	Br $0
	End
	End

	// The last values, one at a time.
	Block
	Loop
	Get R0
	Get R1
	I64GeU
	BrIf $1
	Get R0
	I32WrapI64
	I64Load32U $0
	STEP
	Get R0
	I64Const $4
	I64Add
	Set R0
	Br $0
	End
	End

	Get SP
	Get R3
	I64Store or+32(FP)
	Get SP
	Get R4
	I64Store orLess1+40(FP)
	Get SP
	Get R2
	I64Store last+48(FP)
	RET
