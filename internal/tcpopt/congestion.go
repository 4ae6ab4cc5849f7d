package tcpopt

import (
	"net"
	"syscall"
	"unsafe"
)

// SetCongestion selects the congestion control algorithm cc (Linux's
// TCP_CONGESTION: "reno", "cubic", "bbr", ...) for c. Where the kernel
// refuses it (not built, or not allowed to this process) c keeps its
// algorithm and the error says why.
func SetCongestion(c *net.TCPConn, cc string) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, cc)
	}); err != nil {
		return err
	}
	return serr
}

// Congestion returns the congestion control algorithm of c.
func Congestion(c *net.TCPConn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var buf [16]byte // TCP_CA_NAME_MAX
	n := uint32(len(buf))
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_CONGESTION,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	}); err != nil {
		return "", err
	}
	if errno != 0 {
		return "", errno
	}
	for i, b := range buf[:n] {
		if b == 0 {
			return string(buf[:i]), nil
		}
	}
	return string(buf[:n]), nil
}
