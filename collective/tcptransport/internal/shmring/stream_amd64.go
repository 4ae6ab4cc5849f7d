//go:build amd64 && !noasm && !gccgo && !safe

package shmring

import "unsafe"

// haveStream says that this build streams long ring writes (see fill).
const haveStream = true

// streamLines copies n bytes, a multiple of 64, from src to dst, which is
// 64-byte aligned, with non-temporal stores (stream_amd64.s).
//
//go:noescape
func streamLines(dst, src unsafe.Pointer, n uintptr)
