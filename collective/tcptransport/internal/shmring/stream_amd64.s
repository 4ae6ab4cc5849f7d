//go:build amd64 && !noasm && !gccgo && !safe

#include "textflag.h"

// func streamLines(dst, src unsafe.Pointer, n uintptr)
//
// Copies n bytes (a multiple of 64) from src to dst (64-byte aligned) a
// cache line at a time: four unaligned 16-byte loads, four non-temporal
// stores. The closing SFENCE orders the stores before whatever the caller
// stores next (the ring's head).
TEXT ·streamLines(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SHRQ	$6, CX
	JZ	done

line:
	MOVOU	0(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, 0(DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	ADDQ	$64, SI
	ADDQ	$64, DI
	DECQ	CX
	JNZ	line

done:
	SFENCE
	RET
