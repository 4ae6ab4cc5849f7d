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
		if pl.Share <= 0 || now.Sub(shared) >= pl.Share {
			shared = now
			runtime.Gosched()
		}
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
