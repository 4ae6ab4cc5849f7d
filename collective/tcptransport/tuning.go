package tcptransport

import (
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// tuning holds the settings that only this package's tests and benchmarks
// change: to compare the shipped choices with the alternatives they were
// chosen over, or to make shared memory fail on purpose. Connect runs with
// the zero value, which means every shipped choice; tests reach the others
// through connect and localMesh.
type tuning struct {
	// sockBuf, when positive, fixes SO_SNDBUF and SO_RCVBUF of every data
	// socket to that many bytes (which turns Linux autotuning off); zero
	// leaves autotuning on (see tune).
	sockBuf int
	// readBuf sizes the read buffer behind each receiving socket: zero
	// means recvBuffer, negative none.
	readBuf int
	// spin is how long a Recv polls before it sleeps: zero means automatic
	// (see autoSpin), negative never.
	spin time.Duration
	// quick is how long a shared-memory recv that yields its processor
	// while polling (spin not positive) polls first without yielding:
	// automatic (see autoSpin) unless a test sets it.
	quick time.Duration
	// tcpSpin is how long a small Recv on a TCP link polls where spin is
	// automatic and zero because this host has exactly one processor per
	// rank and every rank of the job is on it (see tcpLook); zero
	// otherwise.
	tcpSpin time.Duration
	// nap is how long a TCP wait that has polled in vain sleeps in a raw
	// ppoll before it parks on the netpoller: tcpNap where tcpSpin is
	// set, zero (park at once) otherwise (see tcpNap).
	nap time.Duration
	// spareKnown says that spin is automatic, every rank said its machine
	// (Config.Machines), so that the ranks that share this rank's
	// processors were all counted, and they are fewer than the processors
	// (see largeLook).
	spareKnown bool
	// rawIO makes the non-blocking readv and writev of TCP links raw
	// system calls, which skip the Go scheduler's entersyscall and
	// exitsyscall (set by connect): where the rank only parks (see
	// parksOnly), because this host's ranks outnumber its processors and
	// no link is in shared memory. Such a rank parks on the netpoller
	// at every wait, so its process is often wholly idle; the scheduler's
	// monitor thread then sleeps until the next system call that enters
	// the scheduler wakes it, a futex wake-up and often a context switch,
	// on a host with no processor to spare, for the first read or write
	// after every wake-up (3.5% of all processor time in a profile of 4
	// ranks, 64 KiB). The calls never block (the sockets are
	// non-blocking): they end once the kernel has copied what fits, and
	// holding the processor through that copy can delay only a
	// stop-the-world of the garbage collector, by as long.
	// Four ranks on the 2-CPU test VM over loopback TCP, medians of 5
	// interleaved launches, Syscall against RawSyscall: 64 KiB 153 against
	// 137 µs, 256 KiB 324 against 285, 1 MiB 816 against 748, 4 MiB 2828
	// against 2472, 64 MiB 52.1 against 47.3 ms; 4 KiB even (89 µs).
	// Where links poll, or shared-memory links yield while they poll (the
	// process is then rarely idle), raw calls were slower: two ranks over
	// TCP at 4 MiB, 837-851 µs against 1017-1058 in three runs; 2 emulated
	// hosts × 2 ranks at 4 MiB, 5681 against 6087 µs (6 launches).
	rawIO bool
	// congestion names the congestion control of same-host connections:
	// empty means sameHostCongestion, "-" the host's default.
	congestion string
	// crossCongestion is the congestion control of connections to other
	// hosts that Config.Congestion chooses (crossChoice), "" for the
	// host's default (set by connect); congestionWarned says whether a
	// refusal of it was logged.
	crossCongestion  string
	congestionWarned *atomic.Bool
	// allCross makes every connection count as one to another host for
	// its congestion control, so that tests on one host reach that path.
	allCross bool
	// procDir stands in for "/proc" when a rank opens a peer's ring offer
	// (see shmring.Open): empty means "/proc". Tests point it at a
	// directory that does not exist to make every offer fail.
	procDir string
	// remoteMin is the least payload a shared-memory link leaves in the
	// sender's memory for the receiver to copy once (see
	// shm.Link.SendWait): zero means the shipped choice (none, unless
	// the environment's GOROVOD_SHM_REMOTE_MIN names a size; see
	// shm.RemoteMinEnv), negative never.
	remoteMin int
	// refuseRemote makes every rank refuse to read its peers' memory, as
	// ranks without the permission do, so that large messages fall back
	// to the rings.
	refuseRemote bool
	// log is the Config's Logger (set by connect).
	log *slog.Logger
	// eager, when not nil, gives each rank of a localMesh its Config.Eager.
	eager func(rank, size int) []int
}

// tcpPoll is how long a small Recv on a TCP link busy-polls (see inbound):
// spin where the host has processors to spare, tcpLook where it has one per
// rank.
func (t tuning) tcpPoll() time.Duration {
	if t.spin > 0 {
		return t.spin
	}
	return t.tcpSpin
}

// largeLook is how long an Exchange whose frame is larger than pollMax
// polls its receiving socket before it sleeps; zero: it sleeps at once.
// A rank polls large exchanges only where it knows that its polling takes
// no processor another rank needs: where every rank of the job is on this
// host, one processor each (tcpSpin), or where every rank said its
// machine and those that share this rank's processors are fewer than
// them (spareKnown). Either way for exchangeLook, or for tcpSpin where
// that is longer, as the shipped tcpLook is.
//
// Across hosts, a machine with a processor to spare cannot be made on
// the 2-CPU test VM; 2 emulated hosts × 1 rank (network namespaces: one
// machine, a processor each and none to spare; 2026-11-29) show both
// sides of it. A build (not kept) that polled their large exchanges for
// 20 µs moved 256 KiB at 3.49 against 3.18 GB/s busbw, 1 MiB at 5.59
// against 4.63 and 16 MiB at 4.40 against 3.36 (six interleaved launches
// of lab_bench.sh with RATE=none LAYOUTS=2x1, the build before as
// ALT_BENCH; Open MPI TCP 2.44, 1.93, 1.75), while gorun -np 2 -H
// host1:1,host2:1 mnist -epochs 1 trained at a median 11.2k against 11.8k
// samples/s, slower in 14 of 22 alternating pairs; a build whose look an
// environment variable set trained at 10.7k against 11.5k for 50 µs and
// 9.4k for the small ones' spinBudget (eight pairs).
// Each rank there computes with GOMAXPROCS 2 on the machine's two
// processors, and a poll takes turns on them; with a processor to spare
// it takes none. Where machines are unknown, the emulated hosts would look
// like separate machines with processors to spare; polling large
// exchanges there, before on BBR, made half the launches five times
// slower (see exchangeOp.run).
func (t tuning) largeLook() time.Duration {
	switch {
	case t.spin == 0 && t.tcpSpin > 0:
		return max(t.tcpSpin, exchangeLook)
	case t.spin > 0 && t.spareKnown:
		return exchangeLook
	}
	return 0
}

// exchangeLook is how long an Exchange larger than pollMax polls where it
// polls at all (see largeLook). Two ranks on the 2-CPU test VM over
// loopback TCP (--no-shared-memory): polling them for tcpLook (20 µs)
// rather than not at all, six interleaved launches, took 256 KiB in 64.5
// against 76.9 µs, 1 MiB in 184 against 209 and 4 MiB in 666 against 814
// (Open MPI TCP 80, 170 and 989), 2 MiB and 64 MiB even, and mnist at np
// 2 over the same links trained faster in each of five alternating pairs
// (30.8-34.2k against 30.2-31.2k samples/s). 50 µs rather than 20
// (2026-11-29, against the build before, five rounds each running gorun
// -np 2 --no-shared-memory allreduce_bench -sizes 4096,...,67108864
// -budget 0.7 of both builds and compare.sh's Open MPI TCP peer): 256 KiB
// 70.4 against 73.1 µs, 1 MiB 232 against 265, 4 MiB 1009 against 1095,
// 16 MiB 4186 against 4463 (Open MPI TCP 107, 226, 1292, 5945), 4 KiB and
// 64 KiB within 3%, 64 MiB even; gorun -np 2 --no-shared-memory mnist
// -epochs 1 trained at a median 35.1k against 35.0k samples/s (eight
// alternating pairs). A build whose look an environment variable set (not
// kept) ran 100 and 200 µs within 6% of 50.
const exchangeLook = 50 * time.Microsecond

// parksOnly reports whether a rank with these (normalized) settings waits
// for every message by parking on the netpoller: its TCP reads never
// poll, and with noShm it has no shared-memory link, whose waits poll.
func (t tuning) parksOnly(noShm bool) bool { return t.tcpPoll() == 0 && noShm }

// normalize fills in the shipped value of every setting left at zero, for
// rank of a job whose ranks have addresses addrs and machines machines
// (see Config.Machines), and turns the "none" values into the zero that
// the code using them tests for.
func (t tuning) normalize(rank int, addrs, machines []string) tuning {
	if t.readBuf == 0 {
		t.readBuf = recvBuffer
	}
	switch t.congestion {
	case "":
		t.congestion = sameHostCongestion
	case "-":
		t.congestion = ""
	}
	switch {
	case t.spin == 0:
		local, sharing := sharingRanks(rank, addrs, nil), sharingRanks(rank, addrs, machines)
		t.spin, t.quick = autoSpin(local, sharing)
		if t.spin == 0 && t.quick > 0 && local == len(addrs) {
			t.tcpSpin, t.nap = tcpLook, tcpNap
		}
		t.spareKnown = len(machines) == len(addrs) && !slices.Contains(machines, "") && sharing < runtime.NumCPU()
	case t.spin < 0:
		t.spin = 0
	}
	if t.remoteMin == 0 {
		t.remoteMin = -1
		if v, err := strconv.Atoi(os.Getenv(shm.RemoteMinEnv)); err == nil && v > 0 {
			t.remoteMin = v
		}
	}
	t.remoteMin = max(t.remoteMin, 0)
	if t.procDir == "" {
		t.procDir = "/proc"
	}
	return t
}
