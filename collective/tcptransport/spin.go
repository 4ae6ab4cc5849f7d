package tcptransport

import (
	"net"
	"runtime"
	"time"
)

// spinBudget is how long a small Recv busy-polls its socket before it
// parks on the netpoller, when the host has a processor to spare beyond
// one for every rank.
// Two ranks in separate processes on the 2-CPU test VM, 4 KiB all-reduce,
// median of 8-10 runs (each itself a median): parking at once 62-64 µs;
// 50 µs 23-28 µs, with runs up to 52 µs; 100 µs 22-23 µs; 200 µs 22 µs,
// every run within 21-29 µs, on the least processor time. With two
// busy-looping processes beside them, 200 µs still ran at 25-28 µs where
// 50 µs fell to 185-228 µs in half the runs. A poll fails when the peer is
// late; the peer is late mostly because its own poll failed and it is
// waking up, which on this VM can take longer than a short budget, so
// short budgets fail in runs.
const spinBudget = 200 * time.Microsecond

// autoSpin returns the busy-polling budget of rank and, where that is
// zero, how long its shared-memory recvs poll before they yield (see
// quickLook): spinBudget, or zero (and quickLook with exactly one
// processor per rank) unless the ranks on this host (those whose address has rank's host part)
// are fewer than its processors. A rank that polls without a spare
// processor holds one that another rank needs, to compute or to send what
// is being waited for. Two ranks training mnist on the 2-CPU test VM (one
// processor each, GOMAXPROCS=1, four alternating launches of an epoch)
// ran at a median 35.9k samples/s polling with sched_yield(2) against
// 31.7k busy-polling, while a bare 4 KiB all-reduce took 3.3 µs rather
// than 2.0. With four
// ranks in separate processes on the 2-CPU test VM, forced polling made the
// 4 KiB all-reduce four times slower (1.47 ms against 0.37 ms) and the
// 1 MiB one 16% slower; with four ranks in one process, 4 KiB took 10-30%
// longer on twice the processor time.
func autoSpin(rank int, addrs []string) (spin, quick time.Duration) {
	self := hostOf(addrs[rank])
	local := 0
	for _, a := range addrs {
		if hostOf(a) == self {
			local++
		}
	}
	switch cpus := runtime.NumCPU(); {
	case local > cpus:
		return 0, 0
	case local == cpus:
		return 0, quickLook
	}
	return spinBudget, 0
}

// quickLook is how long a shared-memory recv busy-polls before it starts
// yielding its processor, when the host has exactly one processor per
// rank: a peer that is running answers a small message within a few
// microseconds, and a system call per look delays that answer. Two ranks
// on the 2-CPU test VM ran a 4 KiB all-reduce in 1.5-2.3 µs this way,
// against 6.7 µs yielding from the first look (and 2.0 µs busy); with
// four ranks, where every look that does not yield keeps a waiting rank
// off its processor, the same 10 µs took 4 KiB from 23-33 µs to 40-44.
const quickLook = 10 * time.Microsecond

// hostOf returns the host part of a "host:port" address, or the whole
// string if it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
