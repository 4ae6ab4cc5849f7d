package shmring

import (
	"os"
	"syscall"
	"unsafe"
)

// Flags of memfd_create(2) and fcntl(2) that package syscall lacks; their
// values are the same on every Linux architecture.
const (
	mfdCloexec      = 0x1
	mfdAllowSealing = 0x2
	mfdNoexecSeal   = 0x8 // Linux 6.3 and later

	fAddSeals = 1033
	fGetSeals = 1034

	sealSeal   = 0x1
	sealShrink = 0x2
	sealGrow   = 0x4
)

// memfd creates an anonymous memory file (memfd_create(2)): it lives in
// the kernel's internal tmpfs, has no name in any directory, and is freed
// when its last descriptor and mapping are gone. It may be sealed. It is
// also made non-executable where the kernel knows how (Linux 6.3 and later,
// which otherwise log a warning, or refuse where vm.memfd_noexec asks).
func memfd(name string) (*os.File, error) {
	if !haveMemfd {
		return nil, os.NewSyscallError("memfd_create", syscall.ENOSYS)
	}
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return nil, err
	}
	flags := uintptr(mfdCloexec | mfdAllowSealing | mfdNoexecSeal)
	for {
		fd, _, e := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(p)), flags, 0)
		switch {
		case e == 0:
			return os.NewFile(fd, "memfd:"+name), nil
		case e == syscall.EINVAL && flags&mfdNoexecSeal != 0:
			flags &^= mfdNoexecSeal // a kernel before 6.3
		case e != syscall.EINTR:
			return nil, os.NewSyscallError("memfd_create", e)
		}
	}
}

// fcntl runs fcntl(2) with an integer argument.
func fcntl(fd, cmd, arg int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
