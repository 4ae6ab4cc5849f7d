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

// autoSpin returns the busy-polling budget of a rank and, where that is
// zero, how long its shared-memory recvs poll before they yield (see
// quickLook), from the ranks on its host (local, by address) and those
// that share its processors (sharing: its host's and its machine's, see
// sharingRanks): spinBudget, or zero (and quickLook with exactly one
// processor per rank) unless the local ranks are fewer than its
// processors; and zero for both where the sharing ranks outnumber them. A
// rank that polls without a spare processor holds one that another rank
// needs, to compute or to send what is being waited for. Two ranks
// training mnist on the 2-CPU test VM (one processor each, GOMAXPROCS=1,
// four alternating launches of an epoch) ran at a median 35.9k samples/s
// polling with sched_yield(2) against 31.7k busy-polling, while a bare 4
// KiB all-reduce took 3.3 µs rather than 2.0. With four
// ranks in separate processes on the 2-CPU test VM, forced polling made the
// 4 KiB all-reduce four times slower (1.47 ms against 0.37 ms) and the
// 1 MiB one 16% slower; with four ranks in one process, 4 KiB took 10-30%
// longer on twice the processor time.
//
// Ranks on hosts of their own by address can still share processors, and
// then polling costs what it costs on one host. On the emulated hosts of
// internal/testlab (network namespaces of the 2-CPU test VM), before ranks
// knew their machines, each of 4 hosts × 1 rank polled its small receives
// for spinBudget; counted by machine (4 ranks on 2 processors) none polls.
// Five interleaved launches of lab_bench.sh without a rate limit, against
// the build before (2026-11-29): on 4 × 1 a 4 KiB all-reduce took 115
// against 412 µs, and busbw was 0.366 against 0.156 GB/s at 64 KiB, 0.73
// against 0.56 at 256 KiB, 1.58 against 1.40 at 1 MiB, 1.63 against 1.60
// at 64 MiB; on 2 × 2 (whose 2 ranks per host already filled its
// processors) 4 KiB took 65.5 against 68.7 µs, 64 KiB 0.349 against 0.296
// GB/s, 1-64 MiB within 3%. At 2 Gbit/s (three launches) 2 × 2 moved 64
// MiB at 0.358 against 0.357 and 4 × 1 64 KiB at 0.192 against 0.158. mnist
// (gorun -np 4, one epoch, five alternating pairs) trained at a median 9.0k
// against 4.3k samples/s on 4 × 1, faster in every pair, and at 22.2k
// against 22.2k on 2 × 2.
func autoSpin(local, sharing int) (spin, quick time.Duration) {
	switch cpus := runtime.NumCPU(); {
	case sharing > cpus: // never fewer than local
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

// sharingRanks counts the ranks that share rank's processors, rank
// included: those whose address has rank's host part, and those whose
// machine is rank's where that is known. With nil machines it counts the
// ranks on rank's host.
func sharingRanks(rank int, addrs, machines []string) int {
	var self string
	if len(machines) == len(addrs) {
		self = machines[rank]
	}
	host, n := hostOf(addrs[rank]), 0
	for i, a := range addrs {
		if hostOf(a) == host || self != "" && machines[i] == self {
			n++
		}
	}
	return n
}

// tcpLook is how long a small Recv on a TCP link busy-polls when the host
// has exactly one processor per rank, where shared-memory links look for
// quickLook and then yield. A TCP poll is a non-blocking readv, so the
// processor stays with the kernel's loopback or network path while it
// waits; parking instead costs a sleep and a wake-up through the
// netpoller, longer than a small message takes. Two ranks on the 2-CPU
// test VM over loopback TCP (--no-shared-memory), medians of three
// interleaved launches, never polling against 20 µs: a 4 KiB all-reduce
// 22.3 against 7.7 µs (Open MPI TCP, which always polls: 13.8), 64 KiB
// 56.8 against 18.5 (22.7), 256 KiB 82.1 against 51.2 (84.9); 1 MiB and
// 4 MiB within the noise or faster. mnist at np 2 over the same links
// trained no slower (eight alternating launches of an epoch: medians 32.1k
// never polling, 33.1k with 20 µs; 200 µs gained no more). A rank polls
// only while it waits for a message, on a processor of its own. Only a job
// whose ranks are all on this host polls so: a rank whose peers' "hosts"
// share its processors knows it only where they said their machines (see
// Config.Machines), and on the emulated hosts
// (internal/testlab: network namespaces of one 2-CPU VM, 2 × 2 ranks)
// polling cross-host links made the 4 KiB to 1 MiB all-reduces 11-25%
// slower (busbw 0.063 against 0.084 GB/s at 4 KiB, 0.945 against 1.057
// at 1 MiB; three interleaved launches each).
//
// 100 µs rather than 20 (2026-11-30, the VM in the state where a cache line
// bounced between its two processors takes about 500 ns a round trip; six
// interleaved launches of gorun -np 2 --no-shared-memory allreduce_bench
// of both builds and compare.sh's Open MPI TCP peer): 4 KiB 16.2 against
// 27.1 µs, 16 KiB 27.3 against 32.4, 64 KiB 39.8 against 77.8 (Open MPI
// TCP 31.1, 33.9, 49.0); 256 KiB to 16 MiB, whose exchanges then look for
// as long (largeLook), within the launches' spread (1 MiB 296 against
// 298, 16 MiB 7.10 against 6.67 ms). mnist at np 2 over the same links,
// eight alternating pairs: medians 14.8k against 14.9k samples/s, the
// longer look faster in five.
const tcpLook = 100 * time.Microsecond

// hostOf returns the host part of a "host:port" address, or the whole
// string if it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
