package main

import (
	"math"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

// newCNN is conv5×5(16)-relu-pool, conv5×5(32)-relu-pool, dense 128-relu,
// dense 10. Images are channel-last (height, width, channel) rows.
func newCNN(rng *rand.Rand) *model {
	return &model{layers: []layer{
		newConv("conv1", side, side, 1, 16, 5, rng), &relu{}, &maxPool{h: side, w: side, c: 16},
		newConv("conv2", side/2, side/2, 16, 32, 5, rng), &relu{}, &maxPool{h: side / 2, w: side / 2, c: 32},
		newDense("fc1", 7*7*32, 128, false, rng), &relu{},
		newDense("fc2", 128, classes, false, rng),
	}}
}

// conv is a stride-1 "same" convolution, computed as one matrix product
// over the whole batch: the im2col patches (batch·h·w) × (k·k·cin) times
// the weights (k·k·cin) × cout.
type conv struct {
	h, w, cin, cout, k int
	wt, b              *hvd.Param
	cols, y, dcols, dx mat
	first              bool
}

func newConv(name string, h, w, cin, cout, k int, rng *rand.Rand) *conv {
	l := &conv{h: h, w: w, cin: cin, cout: cout, k: k, first: cin == 1,
		wt: hvd.NewParam(name+".w", k*k*cin*cout), b: hvd.NewParam(name+".b", cout)}
	l.wt.Shape = []int{k * k * cin, cout} // the im2col matrix, for gradient hooks
	std := math.Sqrt(2 / float64(k*k*cin))
	for i := range l.wt.Value {
		l.wt.Value[i] = std * rng.NormFloat64()
	}
	return l
}

func (l *conv) params() []*hvd.Param { return []*hvd.Param{l.wt, l.b} }

func (l *conv) patch() int { return l.k * l.k * l.cin }

func (l *conv) forward(x *mat) *mat {
	pixels := x.r * l.h * l.w
	cols := l.cols.reshape(pixels, l.patch())
	l.im2col(x, cols)
	y := l.y.reshape(x.r, l.h*l.w*l.cout)
	for p := range pixels {
		copy(y.d[p*l.cout:(p+1)*l.cout], l.b.Value)
	}
	gemm(false, false, pixels, l.cout, l.patch(), 1, cols.d, l.wt.Value, 1, y.d)
	return y
}

func (l *conv) backward(dy *mat) *mat {
	pixels := dy.r * l.h * l.w
	gemm(true, false, l.patch(), l.cout, pixels, 1, l.cols.d, dy.d, 0, l.wt.Grad)
	clear(l.b.Grad)
	for p := range pixels {
		for j, v := range dy.d[p*l.cout : (p+1)*l.cout] {
			l.b.Grad[j] += v
		}
	}
	if l.first {
		return nil
	}
	dcols := l.dcols.reshape(pixels, l.patch())
	gemm(false, true, pixels, l.patch(), l.cout, 1, dy.d, l.wt.Value, 0, dcols.d)
	dx := l.dx.reshape(dy.r, l.h*l.w*l.cin)
	clear(dx.d)
	l.col2im(dcols, dx)
	return dx
}

// each calls f for every (patch row, patch column, image offset) of the
// batch whose source pixel lies inside the image (padding is zero).
func (l *conv) each(n int, f func(row, col, off int)) {
	pad := l.k / 2
	for s := range n {
		for y := range l.h {
			for x := range l.w {
				row := (s*l.h+y)*l.w + x
				for ky := range l.k {
					sy := y + ky - pad
					if sy < 0 || sy >= l.h {
						continue
					}
					for kx := range l.k {
						sx := x + kx - pad
						if sx < 0 || sx >= l.w {
							continue
						}
						f(row, (ky*l.k+kx)*l.cin, ((s*l.h+sy)*l.w+sx)*l.cin)
					}
				}
			}
		}
	}
}

func (l *conv) im2col(x, cols *mat) {
	clear(cols.d)
	p := l.patch()
	l.each(x.r, func(row, col, off int) {
		copy(cols.d[row*p+col:row*p+col+l.cin], x.d[off:off+l.cin])
	})
}

func (l *conv) col2im(dcols, dx *mat) {
	p := l.patch()
	l.each(dx.r, func(row, col, off int) {
		src := dcols.d[row*p+col : row*p+col+l.cin]
		for c, v := range src {
			dx.d[off+c] += v
		}
	})
}

// maxPool takes the maximum of each 2×2 block, per channel.
type maxPool struct {
	h, w, c int
	arg     []int // input index of each output's maximum
	y, dx   mat
}

func (l *maxPool) params() []*hvd.Param { return nil }

func (l *maxPool) forward(x *mat) *mat {
	oh, ow := l.h/2, l.w/2
	y := l.y.reshape(x.r, oh*ow*l.c)
	l.arg = l.arg[:0]
	for s := range x.r {
		img := x.d[s*x.c : (s+1)*x.c]
		for oy := range oh {
			for ox := range ow {
				for c := range l.c {
					base := (2*oy*l.w+2*ox)*l.c + c
					best := base
					for _, d := range [3]int{l.c, l.w * l.c, (l.w + 1) * l.c} {
						if img[base+d] > img[best] {
							best = base + d
						}
					}
					y.d[s*y.c+(oy*ow+ox)*l.c+c] = img[best]
					l.arg = append(l.arg, s*x.c+best)
				}
			}
		}
	}
	return y
}

func (l *maxPool) backward(dy *mat) *mat {
	dx := l.dx.reshape(dy.r, l.h*l.w*l.c)
	clear(dx.d)
	for i, v := range dy.d {
		dx.d[l.arg[i]] += v
	}
	return dx
}
