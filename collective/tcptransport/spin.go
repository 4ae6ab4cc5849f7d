package tcptransport

import (
	"net"
	"runtime"
	"time"
)

// spinBudget is how long a small Recv busy-polls its socket before it
// parks on the netpoller, when the host has a processor for every rank.
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

// autoSpin returns the busy-polling budget of rank: spinBudget, or zero if
// the ranks on this host (those whose address has rank's host part)
// outnumber its processors. A rank that polls then holds a processor that
// another rank needs in order to send what is being waited for: with four
// ranks in separate processes on the 2-CPU test VM, forced polling made the
// 4 KiB all-reduce four times slower (1.47 ms against 0.37 ms) and the
// 1 MiB one 16% slower; with four ranks in one process, 4 KiB took 10-30%
// longer on twice the processor time.
func autoSpin(rank int, addrs []string) time.Duration {
	self := hostOf(addrs[rank])
	local := 0
	for _, a := range addrs {
		if hostOf(a) == self {
			local++
		}
	}
	if local > runtime.NumCPU() {
		return 0
	}
	return spinBudget
}

// hostOf returns the host part of a "host:port" address, or the whole
// string if it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
