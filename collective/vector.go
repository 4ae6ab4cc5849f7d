package collective

import (
	"context"
	"slices"

	"github.com/gorovod/gorovod/kernels"
)

// Vectored is implemented by Conns that can send one message gathered from
// several buffers and receive one scattered into several, without joining
// them first. The message is the parts' concatenation: on the link it is
// the same frame Send and Recv move, so a vectored sender may face a plain
// receiver. Without it, AllreduceVec gathers and scatters through a
// buffer of its own.
type Vectored interface {
	// SendVec transmits the concatenation of parts under tag.
	SendVec(ctx context.Context, tag Tag, parts [][]byte) error
	// RecvVec fills parts, in order, with the next message, which must
	// carry tag and be as long as the parts together.
	RecvVec(ctx context.Context, tag Tag, parts [][]byte) error
}

// vector is an operation's main buffer held as parts laid end to end (see
// AllreduceVec): byte i of the whole lies in the first part k with
// ends[k] > i.
type vector struct {
	parts [][]byte
	ends  []int // ends[k]: the bytes of parts[:k+1]
}

func newVector(parts [][]byte) *vector {
	v := &vector{parts: parts, ends: make([]int, len(parts))}
	n := 0
	for k, p := range parts {
		n += len(p)
		v.ends[k] = n
	}
	return v
}

// size is the bytes of all parts.
func (v *vector) size() int {
	if len(v.ends) == 0 {
		return 0
	}
	return v.ends[len(v.ends)-1]
}

// pieces appends to into the slices of the parts that bytes [off, end) of
// the whole lie in, in order, skipping empty ones, and returns it.
func (v *vector) pieces(off, end int, into [][]byte) [][]byte {
	k, _ := slices.BinarySearch(v.ends, off+1) // first part ending after off
	for ; off < end; k++ {
		start := v.ends[k] - len(v.parts[k])
		stop := min(end, v.ends[k])
		if stop > off {
			into = append(into, v.parts[k][off-start:stop-start])
		}
		off = stop
	}
	return into
}

// piecesLen is the bytes of ps together.
func piecesLen(ps [][]byte) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return n
}

// gather copies ps end to end into buf, which is as long as they are.
func gather(buf []byte, ps [][]byte) {
	off := 0
	for _, p := range ps {
		off += copy(buf[off:], p)
	}
}

// scatter copies buf into ps in order, the inverse of gather.
func scatter(ps [][]byte, buf []byte) {
	off := 0
	for _, p := range ps {
		off += copy(p, buf[off:])
	}
}

// AllreduceVec is Allreduce of the concatenation of parts, each a whole
// number of dt elements, reduced in place where the parts lie: the same
// schedule, messages and result bit for bit as Allreduce of one buffer
// holding the parts end to end, without copying them into one. A segment
// that spans several parts travels as one message, gathered and scattered
// by the transport when its Conns are Vectored. Parts must not overlap.
// This is what fuses many tensors into one operation (collective/engine).
// With op kernels.Adasum, which is not element-wise, each part is a tensor
// of its own with coefficients of its own (AllreduceAdasum with one count
// per part); the parts are copied into one buffer and back.
func (c *Comm) AllreduceVec(ctx context.Context, dt kernels.DType, parts [][]byte, op kernels.Op, o ReduceOptions) error {
	if op == kernels.Adasum {
		return c.allreduceVecAdasum(ctx, dt, parts, o)
	}
	seq, err := c.begin("allreduce")
	if err != nil {
		return err
	}
	x := call{c: c, name: "allreduce", seq: seq}
	defer x.end()
	n := 0
	for _, p := range parts {
		k, err := x.elements(dt, p)
		if err != nil {
			return err
		}
		n += k
	}
	red, err := x.reducer(dt, op)
	if err != nil {
		return err
	}
	pre, post := o.Factors(op, c.Size())
	for _, p := range parts {
		if err := x.scale(dt, p, pre); err != nil {
			return err
		}
	}
	p, err := x.allreducePlan(c.allreduceKey(n, dt.Size()))
	if err != nil {
		return err
	}
	r := x.run(p, dt.Size())
	r.vec, r.reduce = newVector(parts), red
	if err := c.execute(ctx, r, n*dt.Size()); err != nil {
		return err
	}
	for _, p := range parts {
		if err := kernels.Scale(dt, p, post); err != nil {
			return err
		}
	}
	return nil
}
