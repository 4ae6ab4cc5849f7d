//go:build !amd64 || noasm || gccgo || safe

package shmring

import "unsafe"

// haveStream says that this build has no streamLines (other architectures,
// and the tags noasm, safe and gccgo of package kernels): every ring write
// copies as copy does.
const haveStream = false

// streamLines is never called where haveStream is false.
func streamLines(dst, src unsafe.Pointer, n uintptr) { panic("shmring: no streaming copy") }
