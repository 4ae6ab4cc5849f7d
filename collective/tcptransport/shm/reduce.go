package shm

import (
	"io"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// MaxElem is the largest element RecvReduce folds.
const MaxElem = 16

// RecvReduce reads one frame, checked as Recv checks it against tag and
// len(dst), and folds its payload into dst as it arrives: reduce runs on
// the payload where it lies in the inbound ring, whole elements of esz
// bytes at a time (an element split by the ring's end goes through a few
// bytes of its own), so the payload is never copied out of the ring. A
// remote frame (see SendWait) is copied into a buffer of the link's and
// folded from there.
func (l *Link) RecvReduce(tag collective.Tag, dst []byte, esz int, reduce func(dst, src []byte)) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.mapped {
		return l.c.Err()
	}
	if err := l.read(l.rhdr[:]); err != nil {
		return err
	}
	remote, err := frame.CheckAny(l.rhdr[:], tag, len(dst))
	if err != nil {
		return l.c.Corrupt(err.Error())
	}
	if remote {
		if err := l.read(l.rdesc[:]); err != nil {
			return err
		}
		if cap(l.rtmp) < len(dst) {
			l.rtmp = make([]byte, len(dst))
		}
		tmp := l.rtmp[:len(dst)]
		l.rparts = append(l.rparts[:0], tmp)
		err := l.readRemote(l.rparts)
		clear(l.rparts)
		if err == shmring.ErrRefused {
			err = l.read(tmp)
		}
		if err != nil {
			return err
		}
		reduce(dst, tmp)
		return nil
	}
	l.fold = folder{dst: dst, esz: esz, reduce: reduce}
	err = l.in.ReadFunc(len(dst), l.foldFn, l.poll, l.gone.Load, l.stopped)
	l.fold = folder{} // hold on to no caller's buffer
	if err == shmring.ErrGone {
		return l.c.Gone(Receiving, io.EOF)
	}
	return err
}

// folder folds the runs of a payload into dst, in order, whole elements
// at a time.
type folder struct {
	dst    []byte // what is left to fold into
	esz    int
	reduce func(dst, src []byte)
	carry  [MaxElem]byte // the start of an element the last run split
	nc     int           // bytes in carry
}

// add folds run p: first the element carried over from the last run, then
// p's whole elements, and carries the rest.
func (f *folder) add(p []byte) {
	if f.nc > 0 {
		k := copy(f.carry[f.nc:f.esz], p)
		f.nc += k
		p = p[k:]
		if f.nc < f.esz {
			return
		}
		f.reduce(f.dst[:f.esz], f.carry[:f.esz])
		f.dst, f.nc = f.dst[f.esz:], 0
	}
	if whole := len(p) / f.esz * f.esz; whole > 0 {
		f.reduce(f.dst[:whole], p[:whole])
		f.dst, p = f.dst[whole:], p[whole:]
	}
	f.nc = copy(f.carry[:], p)
}
