package tcptransport

import (
	"fmt"
	"net"
	"syscall"
)

// sameHostCongestion is the congestion control of data connections whose
// two ends are on one host. Linux's BBR, the default on many hosts (this
// project's 2-CPU test VM among them), paces its sends with timers when
// the device has no fq qdisc, as loopback has not: a 64 MiB all-reduce of
// two ranks in separate processes then ran at 1.7-1.8 GB/s of bus
// bandwidth on 62 ms of processor time per call, against 2.8-3.2 GB/s on
// 38-48 ms with Reno (in one process, BenchmarkAllreduce: 2.0 against
// 3.9 GB/s). Reno does not pace, a same-host path has no congestion to
// control, and Reno is built into Linux and always allowed to unprivileged
// sockets. Connections to other hosts keep the host's default.
const sameHostCongestion = "reno"

// tune sets the socket options of an established data connection:
// TCP_NODELAY (frames go out at once; there are no small writes to
// coalesce, since header and payload leave in one writev), the congestion
// control of a same-host connection (see sameHostCongestion; best effort:
// a failure leaves the default), that of a connection to another host
// when Config.Congestion names one (a refusal is logged once and leaves
// the default) and, when tun.sockBuf is positive, fixed
// send and receive buffers. Fixed buffers turn off Linux's autotuning and
// are capped by net.core.wmem_max/rmem_max. On loopback, fixed 4 MiB
// buffers streamed 4 MiB frames 9-17% slower than autotuning (median of
// paired runs), were 4-7% slower both ways at once and made no difference
// to 4 KiB round trips (BenchmarkStream, BenchmarkBidirectional,
// BenchmarkPingPong), so sockBuf is zero by default.
func tune(c *net.TCPConn, tun tuning) error {
	if err := c.SetNoDelay(true); err != nil {
		return fmt.Errorf("set TCP_NODELAY: %w", err)
	}
	same := sameHost(c) && !tun.allCross
	cc := tun.congestion
	if !same {
		cc = tun.crossCongestion
	}
	if cc != "" {
		if err := setCongestion(c, cc); err != nil && !same && tun.congestionWarned.CompareAndSwap(false, true) {
			tun.log.Warn("tcptransport: the kernel refused the congestion control of links to other hosts; they keep the host's default",
				"congestion", cc, "err", err)
		}
	}
	if tun.sockBuf <= 0 {
		return nil
	}
	if err := c.SetReadBuffer(tun.sockBuf); err != nil {
		return fmt.Errorf("set SO_RCVBUF: %w", err)
	}
	if err := c.SetWriteBuffer(tun.sockBuf); err != nil {
		return fmt.Errorf("set SO_SNDBUF: %w", err)
	}
	return nil
}

// sameHost reports whether both ends of c are on this host: the peer is a
// loopback address or this connection's own local address.
func sameHost(c *net.TCPConn) bool {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	return ok1 && ok2 && (remote.IP.IsLoopback() || remote.IP.Equal(local.IP))
}

// setCongestion selects the congestion control algorithm cc for c, if the
// kernel lets it; otherwise c keeps the default and the error says why.
func setCongestion(c *net.TCPConn, cc string) error {
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
