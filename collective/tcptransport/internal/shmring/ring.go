package shmring

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// Layout of a ring's memory file (each counter on its own cache line):
//
//	0    head      bytes written in all (uint64, the writer's)
//	64   tail      bytes read in all (uint64, the reader's)
//	128  wseq      bumped after every publication of head (uint32)
//	132  rwaiting  1 while the reader sleeps on wseq (uint32)
//	192  rseq      bumped after every advance of tail (uint32)
//	196  wwaiting  1 while the writer sleeps on rseq (uint32)
//	256  token     TokenSize random bytes that prove the peer opened this file
//	4096 data      the ring's capacity: a power of two from MinCapacity to
//	               MaxCapacity, which the file's size tells
const (
	offHead, offTail     = 0, 64
	offWseq, offRwaiting = 128, 132
	offRseq, offWwaiting = 192, 196
	offToken             = 256
	headerBytes          = 4096
)

// Sizes of a ring.
const (
	// TokenSize is the length of the token that Create returns and Open
	// checks.
	TokenSize = 32
	// MinCapacity and MaxCapacity bound how many bytes a ring holds that
	// the writer has written and the reader has not read yet (its
	// capacity, a power of two, chosen by its creator).
	MinCapacity = 64 << 10
	MaxCapacity = 4 << 20
	// Piece is the most a writer copies in before it publishes, and a
	// reader copies out before it frees the space, so that the other side
	// can start on a large write early.
	Piece = 256 << 10
)

// Ring is one side's view of a ring: its mapping and its own position. One
// side only writes to it and the other only reads from it; each side calls
// at most one of Write and Read at a time.
type Ring struct {
	mem  []byte // the whole mapped file
	data []byte // mem[headerBytes:], the byte ring; its length is the capacity
	pos  uint64 // head for the writer, tail for the reader; only this side's
	fill filler // the writer's choice of how to copy long runs in

	// For the reader (see ReadRemote): the writer's pid and a pidfd of
	// it, -1 for none.
	pid, pidfd int
}

// Unread returns how many bytes the writer has written that the reader
// has not read yet. Only the writer may ask, between its writes.
func (r *Ring) Unread() int { return int(r.pos - atomic.LoadUint64(r.u64(offTail))) }

// Capacity returns how many bytes the ring holds that the writer has
// written and the reader has not read yet.
func (r *Ring) Capacity() int { return len(r.data) }

// FileSize is the size of the memory file, and of the mapping, of a ring
// of the given capacity.
func FileSize(capacity int) int { return headerBytes + capacity }

// validCapacity reports whether a ring may hold c bytes.
func validCapacity(c int) bool {
	return c >= MinCapacity && c <= MaxCapacity && c&(c-1) == 0
}

// u64 is the shared 64-bit counter at offset off of the file.
func (r *Ring) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// u32 is the shared 32-bit word at offset off of the file.
func (r *Ring) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }

// Write copies p into the ring, waiting for room as needed: while the
// ring is full it polls as pl says, then sleeps. stop is asked after every
// sleep (at most ringNap) whether to give up; its error is returned, with
// part of p perhaps written.
//
// The poll before each sleep matters most to a process that runs its Go
// code on one processor (GOMAXPROCS=1, as hvd gives each of two ranks on
// two processors): a goroutine asleep in futex(2) keeps that processor
// until the Go runtime's monitor takes it back, so the goroutine of the
// same process that would read the peer's ring, and so let the peer make
// room here, waits too. Polling yields to it first. Two ranks on the
// 2-CPU test VM, GOMAXPROCS=1, medians of three interleaved launches:
// 16 MiB all-reduce 2041 µs sleeping at once against 1307 polling first,
// 64 MiB 15.4 against 7.4 ms (GOMAXPROCS=2, sleeping at once: 1812 µs and
// 8.4 ms); 4 KiB to 4 MiB unchanged, and at four ranks 1 MiB to 64 MiB
// 1.07-1.12× faster.
func (r *Ring) Write(p []byte, pl Poll, stop func() error) error {
	return r.WriteVec([][]byte{p}, pl, stop)
}

// WriteVec is Write of the parts one after the other, published to the
// reader together: a small frame of a header and its payload costs the
// reader's side one update of the head and one signal, not one per part.
// A long one is still published every Piece, and before the writer
// sleeps for room.
func (r *Ring) WriteVec(parts [][]byte, pl Poll, stop func() error) error {
	published, polled := r.pos, false
	for _, p := range parts {
		for len(p) > 0 {
			tail := atomic.LoadUint64(r.u64(offTail))
			free := len(r.data) - int(r.pos-tail)
			if free == 0 {
				if r.pos != published {
					r.publish()
					published = r.pos
					continue // the reader may have made room meanwhile
				}
				if pl.Spin > 0 && !polled {
					polled = true
					r.poll(offTail, tail, pl, func() bool { return false }, stop)
					continue
				}
				polled = false
				if err := r.sleep(offRseq, offWwaiting, func() bool {
					return atomic.LoadUint64(r.u64(offTail)) == tail
				}, stop); err != nil {
					return err
				}
				continue
			}
			n := min(free, len(p), Piece)
			at := int(r.pos % uint64(len(r.data)))
			k := min(n, len(r.data)-at)
			r.fill.fill(r.data[at:at+k], p[:k])
			r.fill.fill(r.data[:n-k], p[k:n])
			r.pos += uint64(n)
			p = p[n:]
			if r.pos-published >= Piece {
				r.publish()
				published = r.pos
			}
		}
	}
	if r.pos != published {
		r.publish()
	}
	return nil
}

// publish shows the reader everything written so far and wakes it if it
// sleeps.
func (r *Ring) publish() {
	atomic.StoreUint64(r.u64(offHead), r.pos)
	r.signal(offWseq, offRwaiting)
}

// Poll says how a Read polls an empty ring before it sleeps.
type Poll struct {
	// Spin is how long it polls in all; none if not positive.
	Spin time.Duration
	// Yield gives the processor to other processes between looks
	// (sched_yield(2)), once Quick has passed.
	Yield bool
	Quick time.Duration
	// Share is the least time between two looks that let this process's
	// other goroutines run (runtime.Gosched); 0: every look. See poll.
	Share time.Duration
}

// Read fills p from the ring, waiting for data as needed. While the ring
// is empty it first polls as pl says, then sleeps as Write does, asking
// stop after every sleep. Once gone reports that the writer has gone away,
// Read returns what is left and then ErrGone instead of waiting.
func (r *Ring) Read(p []byte, pl Poll, gone func() bool, stop func() error) error {
	off := 0
	return r.ReadFunc(len(p), func(b []byte) { off += copy(p[off:], b) }, pl, gone, stop)
}

// ReadFunc is Read that hands the bytes to fn where they lie in the ring
// instead of copying them out: n bytes in all, in order, in runs of at
// most Piece, a run that wraps around the ring's end in two. The space
// is freed for the writer once fn returns; fn must not keep its slice.
func (r *Ring) ReadFunc(n int, fn func(p []byte), pl Poll, gone func() bool, stop func() error) error {
	polled := pl.Spin <= 0
	for n > 0 {
		head := atomic.LoadUint64(r.u64(offHead))
		avail := int(head - r.pos)
		if avail == 0 {
			switch {
			case !polled:
				polled = true
				r.poll(offHead, r.pos, pl, gone, stop)
			case gone():
				if atomic.LoadUint64(r.u64(offHead)) == r.pos {
					return ErrGone
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
		k := min(avail, n, Piece)
		at := int(r.pos % uint64(len(r.data)))
		first := min(k, len(r.data)-at)
		fn(r.data[at : at+first])
		if first < k {
			fn(r.data[:k-first])
		}
		r.pos += uint64(k)
		n -= k
		atomic.StoreUint64(r.u64(offTail), r.pos)
		r.signal(offRseq, offWwaiting)
	}
	return nil
}
