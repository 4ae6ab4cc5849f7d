package main

import (
	"math"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

// layer is one stage of a feed-forward network over a batch of rows.
// forward keeps what backward needs; backward writes the gradients of the
// layer's parameters and returns the gradient of its input (nil when the
// layer is the first, whose input needs none).
type layer interface {
	forward(x *mat) *mat
	backward(dy *mat) *mat
	params() []*hvd.Param
}

// dense is y = x·W + b, W in×out.
type dense struct {
	in, out int
	w, b    *hvd.Param
	first   bool // no input gradient needed
	x       *mat
	y, dx   mat
}

func newDense(name string, in, out int, first bool, rng *rand.Rand) *dense {
	l := &dense{in: in, out: out, w: hvd.NewParam(name+".w", in*out), b: hvd.NewParam(name+".b", out), first: first}
	l.w.Shape = []int{in, out}        // for gradient hooks (PowerSGD's matrices)
	std := math.Sqrt(2 / float64(in)) // He initialization, for ReLU
	for i := range l.w.Value {
		l.w.Value[i] = std * rng.NormFloat64()
	}
	return l
}

func (l *dense) params() []*hvd.Param { return []*hvd.Param{l.w, l.b} }

func (l *dense) forward(x *mat) *mat {
	l.x = x
	y := l.y.reshape(x.r, l.out)
	for i := range x.r {
		copy(y.d[i*l.out:(i+1)*l.out], l.b.Value)
	}
	gemm(false, false, x.r, l.out, l.in, 1, x.d, l.w.Value, 1, y.d)
	return y
}

func (l *dense) backward(dy *mat) *mat {
	gemm(true, false, l.in, l.out, dy.r, 1, l.x.d, dy.d, 0, l.w.Grad) // dW = xᵀ·dy
	clear(l.b.Grad)
	for i := range dy.r {
		for j, v := range dy.d[i*l.out : (i+1)*l.out] {
			l.b.Grad[j] += v
		}
	}
	if l.first {
		return nil
	}
	dx := l.dx.reshape(dy.r, l.in)
	gemm(false, true, dy.r, l.in, l.out, 1, dy.d, l.w.Value, 0, dx.d) // dx = dy·Wᵀ
	return dx
}

// relu is max(0, x), element-wise.
type relu struct {
	y, dx mat
}

func (l *relu) params() []*hvd.Param { return nil }

func (l *relu) forward(x *mat) *mat {
	y := l.y.reshape(x.r, x.c)
	for i, v := range x.d {
		y.d[i] = max(v, 0)
	}
	return y
}

func (l *relu) backward(dy *mat) *mat {
	dx := l.dx.reshape(dy.r, dy.c)
	for i, v := range dy.d {
		if l.y.d[i] > 0 {
			dx.d[i] = v
		} else {
			dx.d[i] = 0
		}
	}
	return dx
}
