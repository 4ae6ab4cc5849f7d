package tcptransport

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// tcpNap is how long a wait on a TCP link that has polled in vain sleeps
// in ppoll(2), made as a raw system call, before it parks on the
// netpoller, where every rank of the job is on this host with a processor
// each (tcpSpin; see tuning.nap). Parking hands the goroutine to the Go
// scheduler: the thread gives up its P, the runtime's monitor and netpoller
// threads see the process go idle, and the wake-up comes back through
// the netpoller's thread, which hands the goroutine on, often to another
// thread; with GOMAXPROCS above 1 that is several futex wake-ups and
// context switches per wait. A nap keeps the thread and its P: the
// kernel wakes the very thread that waits, once, when the socket is
// ready, and the process's other goroutines run on its other Ps
// meanwhile. Two ranks over loopback TCP on the 2-CPU test VM
// (2026-11-29, AMD EPYC, about 1 µs per system call), five interleaved
// launches, napping 200 µs against parking at once (both with ShareTurn's
// first look giving no turn): 4 KiB all-reduce 35.5 against 64.3 µs, 256
// KiB 113 against 170, 1 MiB 300 against 418, 4 MiB 1454 against 1388,
// 16 MiB 5745 against 6071 (Open MPI TCP 29.3, 149, 310, 1904, 10527).
// Four ranks on the two processors napping ran 10-30% slower (a napping
// rank's wake-up waits for a processor as a parked one's does, and it
// lacks the netpoller's batching), so ranks that outnumber their
// processors never nap.
//
// A nap holds its P, so a process with one (GOMAXPROCS=1) does not nap
// (see naps): its other goroutines, a training step's computation among
// them, would wait. Two ranks training mnist over loopback TCP with
// GOMAXPROCS=1 napped their way to 11.7k against 12.8k samples/s
// (five alternating pairs, every one slower).
//
// A nap holds its P for at most tcpNap: Close and a cancelled context,
// which wake a parked wait at once, are seen when it ends. The Go
// runtime's preemption signal interrupts it (EINTR), so a collection that
// stops the world does not wait for it.
const tcpNap = 200 * time.Microsecond

// naps reports whether a wait naps for nap before it parks: nap is set
// and the process has another P for its other goroutines. GOMAXPROCS is
// read at every such wait (after a poll has failed), since a rank may set
// it after its links formed (hvd.ShareProcessors).
func naps(nap time.Duration) bool { return nap > 0 && runtime.GOMAXPROCS(0) > 1 }

// ppoll sleeps in ppoll(2) on fds for up to d, or until one of them is
// ready or a signal comes. raw makes it a raw system call (rawPoll): the
// thread keeps its P and the Go scheduler does not see the call.
func ppoll(fds []pollFd, d time.Duration, raw bool) {
	ts := syscall.NsecToTimespec(int64(d))
	p, n, t := uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts))
	if raw {
		_, _, _ = syscall.RawSyscall6(syscall.SYS_PPOLL, p, n, t, 0, 0, 0)
	} else {
		_, _, _ = syscall.Syscall6(syscall.SYS_PPOLL, p, n, t, 0, 0, 0)
	}
}

// rawPoll is a nap's ppoll: raw.
func rawPoll(fds []pollFd, d time.Duration) { ppoll(fds, d, true) }

// rawPollOne is rawPoll on one socket, for events.
func rawPollOne(fd uintptr, events int16, d time.Duration) {
	fds := [1]pollFd{{fd: int32(fd), events: events}}
	rawPoll(fds[:], d)
}

// napIn sleeps in rawPoll until the socket is readable, for up to d,
// through callbacks bound once so that it does not allocate.
func (in *inbound) napIn(d time.Duration) {
	in.napFor = d
	_ = in.rc.Control(in.napInFn)
}

// napInOnce is napIn's RawConn callback.
func (in *inbound) napInOnce(fd uintptr) { rawPollOne(fd, pollIn, in.napFor) }

// napOut sleeps in rawPoll until l's sending socket takes bytes, for up to
// d.
func (l *tcpLink) napOut(d time.Duration) {
	l.napFor = d
	_ = l.wrc.Control(l.napOutFn)
}

// napOutOnce is napOut's RawConn callback.
func (l *tcpLink) napOutOnce(fd uintptr) { rawPollOne(fd, pollOut, l.napFor) }

// napBoth sleeps in rawPoll until l's sending socket takes bytes or
// from's receiving socket has some, for up to d.
func (l *tcpLink) napBoth(from *tcpLink, d time.Duration) {
	l.napFor, l.napFrom = d, from
	_ = l.wrc.Control(l.napBothFn)
	l.napFrom = nil
}

// napBothOut is napBoth's callback for the sending socket, napBothIn the
// one for the receiving socket inside it.
func (l *tcpLink) napBothOut(fd uintptr) {
	l.napWfd = fd
	_ = l.napFrom.r.rc.Control(l.napBothInFn)
}

func (l *tcpLink) napBothIn(fd uintptr) {
	fds := [2]pollFd{{fd: int32(l.napWfd), events: pollOut}, {fd: int32(fd), events: pollIn}}
	rawPoll(fds[:], l.napFor)
}
