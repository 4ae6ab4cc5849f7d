package tcptransport

import (
	"net"
	"syscall"
	"testing"
	"unsafe"
)

// congestionOf returns the congestion control algorithm of c.
func congestionOf(t *testing.T, c *net.TCPConn) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var buf [16]byte
	n := uint32(len(buf))
	var errno syscall.Errno
	rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_CONGESTION,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	})
	if errno != 0 {
		t.Fatal(errno)
	}
	for i, b := range buf[:n] {
		if b == 0 {
			n = uint32(i)
			break
		}
	}
	return string(buf[:n])
}

// TestSameHostCongestion: every lane of a loopback mesh runs Reno.
func TestSameHostCongestion(t *testing.T) {
	m := meshT(t, 3, Config{})
	for r, tr := range m {
		for peer := range 3 {
			if peer == r {
				continue
			}
			c := tr.Conn(peer).(*conn)
			for _, nc := range []*net.TCPConn{c.out.tcp, c.in.tcp} {
				if got := congestionOf(t, nc); got != sameHostCongestion {
					t.Errorf("rank %d, peer %d: congestion control %q, want %q", r, peer, got, sameHostCongestion)
				}
			}
		}
	}
}
