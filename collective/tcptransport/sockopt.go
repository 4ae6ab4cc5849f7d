package tcptransport

import (
	"fmt"
	"net"

	"github.com/gorovod/gorovod/internal/tcpopt"
	"github.com/gorovod/gorovod/settings"
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
// sockets. Connections to other hosts run Reno as well, unless configured
// otherwise (see crossHostCongestion).
const sameHostCongestion = "reno"

// crossHostCongestion is the congestion control of data connections to
// other hosts unless Config.Congestion names another. Between two emulated
// hosts (internal/testlab: network namespaces on a bridge, no rate limit,
// this VM's two processors), a two-rank all-reduce with Reno, the host's
// BBR and CUBIC took medians of 316, 553 and 628 µs at 1 MiB, 1.47, 2.31
// and 2.83 ms at 4 MiB, and 24.2, 34.4 and 28.5 ms at 64 MiB (Open MPI,
// on the host's BBR: 441 µs, 2.36 ms, 53.9 ms); at 512 KiB 172, 149 and
// 199 µs (Open MPI 182), at 64 KiB 52, 49 and 46 (Open MPI 46). That is
// six interleaved launches of examples/allreduce_bench/lab_bench.sh with
// RATE=none LAYOUTS=2x1 SIZES=64K,512K,1M,4M,64M PEERS="auto cc-bbr
// cc-cubic ompi" REPS=6. BBR paces with timers where the device has no fq
// qdisc; CUBIC's delay-based exit from slow start probably mistakes the
// processors' queueing for congestion (not measured further). Reno only
// grows its window until loss, which in a cluster's network is rare and
// short to recover from (a round trip is tens of microseconds); across a
// lossy or long-distance path the host's own choice may do better, and
// settings.HostCongestion keeps it.
const crossHostCongestion = "reno"

// crossChoice returns the congestion control that Config.Congestion name
// gives connections to other hosts: crossHostCongestion for "", "" (the
// host's default) for settings.HostCongestion, else name.
func crossChoice(name string) string {
	switch name {
	case "":
		return crossHostCongestion
	case settings.HostCongestion:
		return ""
	}
	return name
}

// tune sets the socket options of an established data connection:
// TCP_NODELAY (frames go out at once; there are no small writes to
// coalesce, since header and payload leave in one writev), the congestion
// control of a same-host connection (see sameHostCongestion; best effort:
// a failure leaves the default), that of a connection to another host
// (crossHostCongestion or what Config.Congestion names, unless it keeps
// the host's; a refusal is logged once and leaves the default) and, when
// tun.sockBuf is positive, fixed send and receive buffers. Fixed buffers
// turn off Linux's autotuning and are capped by
// net.core.wmem_max/rmem_max. On loopback, fixed 4 MiB
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
		if err := tcpopt.SetCongestion(c, cc); err != nil && !same && tun.congestionWarned.CompareAndSwap(false, true) {
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
