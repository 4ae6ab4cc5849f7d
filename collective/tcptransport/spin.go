package tcptransport

import (
	"net"
	"os"
	"runtime"
	"time"
)

// spinBudget is how long a small Recv busy-polls its socket before it
// parks on the netpoller, when the host has a processor for every rank.
const spinBudget = 50 * time.Microsecond

// autoSpin returns the busy-polling budget of rank: spinBudget, or zero if
// the ranks on this host (those whose address has rank's host part)
// outnumber its processors. A rank that polls then holds a processor that
// another rank needs in order to send what is being waited for.
func autoSpin(rank int, addrs []string) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("GOROVOD_TCP_SPIN")); err == nil { // EXPERIMENT
		return d
	}
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
