package shmring

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// ringNap is the longest a side sleeps before it asks its stop function
// whether to give up.
const ringNap = 10 * time.Millisecond

// Operations of futex(2).
const futexWait, futexWake = 0, 1

// WakeReader rouses at once every Read of this process that sleeps on r
// waiting for data, so that it asks its gone and stop functions again.
func (r *Ring) WakeReader() { futex(r.u32(offWseq), futexWake, 1<<30) }

// WakeWriter rouses at once every Write of this process that sleeps on r
// waiting for room, so that it asks its stop function again.
func (r *Ring) WakeWriter() { futex(r.u32(offRseq), futexWake, 1<<30) }

// poll busy-waits up to pl.Spin for the counter at off to move from v. It
// gives up early when the writer has gone or stop reports an error.
// Between looks it lets this process's other goroutines run (at most every
// pl.Share), and with pl.Yield, once pl.Quick has passed, also other
// processes (sched_yield(2)): the process that will write may be waiting
// for this very one's processor.
func (r *Ring) poll(off int, v uint64, pl Poll, gone func() bool, stop func() error) {
	start := time.Now()
	deadline, quick := start.Add(pl.Spin), start.Add(pl.Quick)
	shared := start // when the process's goroutines last had a turn
	yielding := false
	for i := 0; ; i++ {
		if atomic.LoadUint64(r.u64(off)) != v {
			return
		}
		if !yielding && i%64 != 63 {
			continue
		}
		now := time.Now()
		if now.After(deadline) || gone() || stop() != nil {
			return
		}
		if pl.Yield && !now.Before(quick) {
			yielding = true // from now on every look
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		}
		ShareTurn(pl.Share, &shared, now)
	}
}

// signal bumps the sequence word at seq and wakes the other side if it
// said it sleeps on it.
func (r *Ring) signal(seq, waiting int) {
	atomic.AddUint32(r.u32(seq), 1)
	if atomic.LoadUint32(r.u32(waiting)) != 0 {
		futex(r.u32(seq), futexWake, 1)
	}
}

// sleep waits on the sequence word at seq until the other side bumps it or
// ringNap passes, unless still() says the wait is already over, then
// returns stop's answer. The order (read seq, announce, re-check, sleep
// only if seq is unchanged) means a bump between the check and the sleep
// is never missed.
func (r *Ring) sleep(seq, waiting int, still func() bool, stop func() error) error {
	v := atomic.LoadUint32(r.u32(seq))
	atomic.StoreUint32(r.u32(waiting), 1)
	if still() {
		futexTimed(r.u32(seq), v, ringNap)
	}
	atomic.StoreUint32(r.u32(waiting), 0)
	return stop()
}

// futex runs futex(2) operation op on addr with val and no timeout.
func futex(addr *uint32, op, val int) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(op), uintptr(val), 0, 0, 0)
}

// futexTimed sleeps on addr while it holds val, for at most d.
func futexTimed(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), uintptr(futexWait), uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// shareEvery is how often a poll lets the process's other goroutines run
// when the process has more than one processor (GOMAXPROCS): with an idle
// processor, runtime.Gosched wakes another thread to run the goroutine
// (and puts this one to sleep), a hand-off between threads per look that
// cost more than the look. With one processor, Gosched costs little and
// is how the goroutine that will let the peer go on gets to run, so a
// poll calls it at every look. Four ranks on the 2-CPU test VM over
// shared memory, GOMAXPROCS=2, medians of five interleaved launches,
// every look against every 20 µs: 4 KiB all-reduce 27.5 against 10.8 µs,
// 64 KiB 70.2 against 26.2; 1 to 16 MiB within 6% either way
// (GOMAXPROCS=1: 8.9 and 24.6 µs). Two ranks on emulated hosts
// (internal/testlab, no rate limit), polling their sockets, three
// interleaved launches: 64 KiB 38.3 against 25.8 µs, 256 KiB 95.2 against
// 68.3, 1 MiB 620 against 518, 4 MiB 2065 against 1716; 4 KiB 14.4
// against 16.3, within its launches' spread (10.5-14.9 against
// 14.8-20.2).
const shareEvery = 20 * time.Microsecond

// ShareEvery is the least time between two looks of a poll that let the
// process's other goroutines run (Poll.Share, and the polls of TCP
// sockets): shareEvery with more than one processor, 0 (every look) with
// one.
func ShareEvery() time.Duration {
	if runtime.GOMAXPROCS(0) > 1 {
		return shareEvery
	}
	return 0
}

// ShareTurn lets the process's other goroutines run (runtime.Gosched)
// unless they last had a turn, at *last, less than share ago; a poll
// calls it between looks, at now. A zero *last is the poll's first call:
// with share > 0 it starts the clock there rather than giving a turn, so
// a poll that ends within share hands nothing between threads. (Polls of
// TCP sockets started from zero and so called Gosched at their first
// failed look, a futex wake-up of another thread each: two ranks over
// loopback TCP on the 2-CPU test VM, 2026-11-29, 32 KiB all-reduce 53
// against 93 µs with this, five interleaved launches.)
func ShareTurn(share time.Duration, last *time.Time, now time.Time) {
	if share > 0 {
		if last.IsZero() {
			*last = now
			return
		}
		if now.Sub(*last) < share {
			return
		}
	}
	*last = now
	gosched()
}

// gosched is runtime.Gosched; tests count the turns through it.
var gosched = runtime.Gosched
