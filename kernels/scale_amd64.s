//go:build amd64 && !noasm && !gccgo && !safe

#include "textflag.h"

// func scaleF32SSE(buf []float32, factor float32)
//
// Multiplies 16 elements per round in four SSE registers, then 4 per
// round, then one at a time. MULPS rounds each lane as MULSS (the
// compiled Go loop) does, so the results are the same bits.
TEXT ·scaleF32SSE(SB), NOSPLIT, $0-28
	MOVQ  buf_base+0(FP), SI
	MOVQ  buf_len+8(FP), CX
	MOVSS factor+24(FP), X0
	SHUFPS $0x00, X0, X0 // the factor in all four lanes

f32by16:
	CMPQ CX, $16
	JLT  f32by4
	MOVUPS (SI), X1
	MOVUPS 16(SI), X2
	MOVUPS 32(SI), X3
	MOVUPS 48(SI), X4
	MULPS  X0, X1
	MULPS  X0, X2
	MULPS  X0, X3
	MULPS  X0, X4
	MOVUPS X1, (SI)
	MOVUPS X2, 16(SI)
	MOVUPS X3, 32(SI)
	MOVUPS X4, 48(SI)
	ADDQ   $64, SI
	SUBQ   $16, CX
	JMP    f32by16

f32by4:
	CMPQ CX, $4
	JLT  f32by1
	MOVUPS (SI), X1
	MULPS  X0, X1
	MOVUPS X1, (SI)
	ADDQ   $16, SI
	SUBQ   $4, CX
	JMP    f32by4

f32by1:
	TESTQ CX, CX
	JEQ   f32done
	MOVSS (SI), X1
	MULSS X0, X1
	MOVSS X1, (SI)
	ADDQ  $4, SI
	DECQ  CX
	JMP   f32by1

f32done:
	RET

// func scaleF64SSE(buf []float64, factor float64)
//
// scaleF32SSE for float64: 8 elements per round, then 2, then one.
TEXT ·scaleF64SSE(SB), NOSPLIT, $0-32
	MOVQ  buf_base+0(FP), SI
	MOVQ  buf_len+8(FP), CX
	MOVSD factor+24(FP), X0
	MOVLHPS X0, X0 // the factor in both lanes

f64by8:
	CMPQ CX, $8
	JLT  f64by2
	MOVUPD (SI), X1
	MOVUPD 16(SI), X2
	MOVUPD 32(SI), X3
	MOVUPD 48(SI), X4
	MULPD  X0, X1
	MULPD  X0, X2
	MULPD  X0, X3
	MULPD  X0, X4
	MOVUPD X1, (SI)
	MOVUPD X2, 16(SI)
	MOVUPD X3, 32(SI)
	MOVUPD X4, 48(SI)
	ADDQ   $64, SI
	SUBQ   $8, CX
	JMP    f64by8

f64by2:
	CMPQ CX, $2
	JLT  f64by1
	MOVUPD (SI), X1
	MULPD  X0, X1
	MOVUPD X1, (SI)
	ADDQ   $16, SI
	SUBQ   $2, CX
	JMP    f64by2

f64by1:
	TESTQ CX, CX
	JEQ   f64done
	MOVSD (SI), X1
	MULSD X0, X1
	MOVSD X1, (SI)

f64done:
	RET
