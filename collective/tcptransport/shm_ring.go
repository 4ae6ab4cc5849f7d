package tcptransport

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A ring is one direction of a same-host link in shared memory: a memory
// file with no name (see createRing) mapped by both processes, holding a
// byte ring that the sender copies frames into and the receiver copies
// them out of. The two sides meet on four counters in the file's first
// page; a side with nothing to do sleeps in futex(2) on the other side's
// counter.
//
// Layout (each counter on its own cache line):
//
//	0    head      bytes written in all (uint64, the writer's)
//	64   tail      bytes read in all (uint64, the reader's)
//	128  wseq      bumped after every publication of head (uint32)
//	132  rwaiting  1 while the reader sleeps on wseq (uint32)
//	192  rseq      bumped after every advance of tail (uint32)
//	196  wwaiting  1 while the writer sleeps on rseq (uint32)
//	256  token     32 random bytes that prove the peer opened this file
//	4096 data      ringBytes bytes
const (
	offHead, offTail         = 0, 64
	offWseq, offRwaiting     = 128, 132
	offRseq, offWwaiting     = 192, 196
	offToken, tokenSize      = 256, 32
	ringHeader               = 4096
	ringBytes                = 4 << 20
	ringFile                 = ringHeader + ringBytes
	ringPiece                = 256 << 10 // the writer publishes at least this often
	ringNap                  = 10 * time.Millisecond
	futexWait, futexWake int = 0, 1
)

// ring is one side's view of a ring: its mapping and its own position.
type ring struct {
	mem  []byte // the whole mapped file
	data []byte // mem[ringHeader:], the byte ring
	pos  uint64 // head for the writer, tail for the reader; only this side's
}

// u64 is the shared 64-bit counter at offset off of the file.
func (r *ring) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// u32 is the shared 32-bit word at offset off of the file.
func (r *ring) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }

// createRing makes a fresh ring with a random token and maps it. The ring
// lives in an anonymous memory file (see memfd) that never has a name in
// any directory, so a process killed at any moment leaves nothing behind:
// the memory goes when the last descriptor or mapping of it does. Its
// pages are reserved and its size sealed before anyone can see it. The
// caller offers the file to its peer as offerPath(f), keeps it open until
// the peer has opened it (or refused), then closes it; the mapping stays.
func createRing() (*ring, *os.File, []byte, error) {
	f, err := memfd("gorovod-ring")
	if err != nil {
		return nil, nil, nil, err
	}
	if err := prepareRingFile(f); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	r, err := mapRing(f)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	token := make([]byte, tokenSize)
	rand.Read(token)
	copy(r.mem[offToken:], token)
	return r, f, token, nil
}

// prepareRingFile makes f private to this user, reserves its pages and
// seals its size. Reserving now matters: memory that runs out later (a
// full memory cgroup) would kill the process with SIGBUS on a write, where
// a failure here only keeps the link on TCP. The seals stop either side
// from shrinking the file under the other's mapping, which would do the
// same.
func prepareRingFile(f *os.File) error {
	fd := int(f.Fd())
	if err := syscall.Fchmod(fd, 0o600); err != nil {
		return os.NewSyscallError("fchmod", err)
	}
	if err := syscall.Fallocate(fd, 0, 0, ringFile); err != nil {
		return os.NewSyscallError("fallocate", err)
	}
	if _, err := fcntl(fd, fAddSeals, sealShrink|sealGrow|sealSeal); err != nil {
		return os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	return nil
}

// offerPath names f for a peer on this host: its descriptor under /proc.
func offerPath(f *os.File) string {
	return fmt.Sprintf(offerFormat, os.Getpid(), f.Fd())
}

// offerFormat is the form of a ring offer: the offering process's pid and
// the descriptor of its ring's memory file.
const offerFormat = "/proc/%d/fd/%d"

// procDir is where openRing looks for an offered descriptor, in place of
// the offer's "/proc". Tests point it elsewhere to make every offer fail.
var procDir = "/proc"

// ringPath checks that offer has the form offerPath makes and returns the
// path to open it by.
func ringPath(offer string) (string, error) {
	var pid, fd int
	_, err := fmt.Sscanf(offer, offerFormat, &pid, &fd)
	if err != nil || pid <= 0 || fd < 0 || fmt.Sprintf(offerFormat, pid, fd) != offer {
		return "", fmt.Errorf("malformed ring offer %q", offer)
	}
	return filepath.Join(procDir, strconv.Itoa(pid), "fd", strconv.Itoa(fd)), nil
}

// openRing maps the ring a peer offered (see offerPath) and checks it: a
// memory file of the ring's size, sealed against resizing, that carries
// token. Opening another process's descriptor through /proc works only on
// this host, in the same pid namespace, for the same user: anywhere else
// the offer fails here and the link stays on TCP.
func openRing(offer string, token []byte) (*ring, error) {
	path, err := ringPath(offer)
	if err != nil {
		return nil, err
	}
	if len(token) != tokenSize {
		return nil, fmt.Errorf("ring offer %q: token of %d bytes, want %d", offer, len(token), tokenSize)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkRingFile(f); err != nil {
		return nil, fmt.Errorf("ring %s: %w", path, err)
	}
	r, err := mapRing(f)
	if err != nil {
		return nil, err
	}
	if string(r.mem[offToken:offToken+tokenSize]) != string(token) {
		r.unmap()
		return nil, fmt.Errorf("ring %s: token mismatch", path)
	}
	return r, nil
}

// checkRingFile checks that f is a regular file of the ring's size whose
// size is sealed (which only a memory file can be).
func checkRingFile(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != ringFile {
		return fmt.Errorf("not a %d-byte file (%v, %d bytes)", ringFile, st.Mode(), st.Size())
	}
	seals, err := fcntl(int(f.Fd()), fGetSeals, 0)
	if err != nil {
		return os.NewSyscallError("fcntl(F_GET_SEALS)", err)
	}
	if want := sealShrink | sealGrow; seals&want != want {
		return fmt.Errorf("size not sealed (seals %#x)", seals)
	}
	return nil
}

// mapRing maps the ring file f, shared and writable.
func mapRing(f *os.File) (*ring, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, ringFile, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &ring{mem: mem, data: mem[ringHeader:]}, nil
}

// unmap removes this process's mapping of the ring.
func (r *ring) unmap() { _ = syscall.Munmap(r.mem) }

// write copies p into the ring, waiting for space as needed. stop is
// asked after every sleep (at most ringNap) whether to give up, and its
// error is returned.
func (r *ring) write(p []byte, stop func() error) error {
	for len(p) > 0 {
		tail := atomic.LoadUint64(r.u64(offTail))
		free := ringBytes - int(r.pos-tail)
		if free == 0 {
			if err := r.sleep(offRseq, offWwaiting, func() bool {
				return atomic.LoadUint64(r.u64(offTail)) == tail
			}, stop); err != nil {
				return err
			}
			continue
		}
		n := min(free, len(p), ringPiece)
		at := int(r.pos % ringBytes)
		k := copy(r.data[at:], p[:n])
		copy(r.data, p[k:n])
		r.pos += uint64(n)
		p = p[n:]
		atomic.StoreUint64(r.u64(offHead), r.pos)
		r.signal(offWseq, offRwaiting)
	}
	return nil
}

// errRingGone is read's report that the writer went away and everything
// it wrote has been read.
var errRingGone = errors.New("shared-memory peer gone")

// read fills p from the ring, waiting for data as needed (see write).
// Once gone reports that the writer has gone away, read returns what is
// left and then errRingGone instead of waiting.
func (r *ring) read(p []byte, spin time.Duration, yield bool, gone func() bool, stop func() error) error {
	polled := spin <= 0
	for len(p) > 0 {
		head := atomic.LoadUint64(r.u64(offHead))
		avail := int(head - r.pos)
		if avail == 0 {
			switch {
			case !polled:
				polled = true
				r.poll(offHead, r.pos, spin, yield, gone, stop)
			case gone():
				if atomic.LoadUint64(r.u64(offHead)) == r.pos {
					return errRingGone
				}
			default:
				if err := r.sleep(offWseq, offRwaiting, func() bool {
					return atomic.LoadUint64(r.u64(offHead)) == head && !gone()
				}, stop); err != nil {
					return err
				}
			}
			continue
		}
		n := min(avail, len(p), ringPiece)
		at := int(r.pos % ringBytes)
		k := copy(p[:n], r.data[at:])
		copy(p[k:n], r.data)
		r.pos += uint64(n)
		p = p[n:]
		atomic.StoreUint64(r.u64(offTail), r.pos)
		r.signal(offRseq, offWwaiting)
	}
	return nil
}

// poll busy-waits up to spin for the counter at off to move from v. It
// gives up early when the peer has gone or the link has stopped. Between
// looks it lets this process's other goroutines run, and with yield also
// other processes (sched_yield(2)): where ranks outnumber the processors
// the peer that will write may be waiting for this very one.
func (r *ring) poll(off int, v uint64, spin time.Duration, yield bool, gone func() bool, stop func() error) {
	deadline := time.Now().Add(spin)
	for i := 0; ; i++ {
		if atomic.LoadUint64(r.u64(off)) != v {
			return
		}
		if yield {
			syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if yield || i%64 == 63 {
			if time.Now().After(deadline) || gone() || stop() != nil {
				return
			}
			runtime.Gosched()
		}
	}
}

// signal bumps the sequence word at seq and wakes the other side if it
// said it sleeps on it.
func (r *ring) signal(seq, waiting int) {
	atomic.AddUint32(r.u32(seq), 1)
	if atomic.LoadUint32(r.u32(waiting)) != 0 {
		futex(r.u32(seq), futexWake, 1)
	}
}

// sleep waits on the sequence word at seq until the other side bumps it or
// ringNap passes, unless still() says the wait is already over. The order
// (read seq, announce, re-check, sleep only if seq is unchanged) means a
// bump between the check and the sleep is never missed.
func (r *ring) sleep(seq, waiting int, still func() bool, stop func() error) error {
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
