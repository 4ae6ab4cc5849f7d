package hvdgomlx_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gorovod/gorovod/frameworks/gomlx"
)

// The tests here compare the composed operations, run inside graphs on
// hvdgomlx.Trainable(simplego), with direct evaluations in Go: element for element
// for Reverse and Pad, which only move values, and within 1e-12 for the
// gradients, which sum float64 products in another order.

// nd is a dense row-major float64 array for the references.
type nd struct {
	dims []int
	v    []float64
}

func newND(dims ...int) nd {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return nd{dims: dims, v: make([]float64, n)}
}

func (a nd) off(idx []int) int {
	o := 0
	for i, d := range a.dims {
		o = o*d + idx[i]
	}
	return o
}

// each calls f with every index of dims in row-major order.
func each(dims []int, f func(idx []int)) {
	idx := make([]int, len(dims))
	for _, d := range dims {
		if d == 0 {
			return
		}
	}
	for {
		f(idx)
		a := len(dims) - 1
		for ; a >= 0; a-- {
			if idx[a]++; idx[a] < dims[a] {
				break
			}
			idx[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

func randND(r *rand.Rand, levels int, dims ...int) nd {
	a := newND(dims...)
	for i := range a.v {
		if levels > 0 { // few distinct values: windows with equal maxima
			a.v[i] = float64(r.IntN(levels))
		} else {
			a.v[i] = r.Float64()*2 - 1
		}
	}
	return a
}

func (a nd) tensor() *tensors.Tensor { return tensors.FromFlatDataAndDimensions(a.v, a.dims...) }

// run executes fn on hvdgomlx.Trainable(simplego) with the inputs and returns its
// outputs' flat values.
func run(t *testing.T, fn func(in []*graph.Node) []*graph.Node, inputs ...nd) [][]float64 {
	t.Helper()
	e, err := graph.NewExec(hvdgomlx.Trainable(theBackend()), fn)
	if err != nil {
		t.Fatal(err)
	}
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = in.tensor()
	}
	out, err := e.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]float64, len(out))
	for i, o := range out {
		res[i] = tensors.MustCopyFlatData[float64](o)
	}
	return res
}

func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > tol || math.IsNaN(got[i]) {
			t.Fatalf("%s: value %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestTrainableCapabilities(t *testing.T) {
	inner := theBackend().Capabilities().Operations
	ops := hvdgomlx.Trainable(theBackend()).Capabilities().Operations
	for op, ok := range inner {
		if ok && !ops[op] {
			t.Errorf("%s: the backend has it, Trainable's capabilities do not", op)
		}
	}
	for _, op := range []backends.OpType{backends.OpTypeReverse, backends.OpTypePad,
		backends.OpTypeSelectAndScatterMax, backends.OpTypeSelectAndScatterMin} {
		if inner[op] {
			t.Errorf("simplego now has %s itself: Trainable's composed one is no longer used there", op)
		}
		if !ops[op] {
			t.Errorf("%s missing from Trainable's capabilities", op)
		}
	}
	if hvdgomlx.Trainable(nil) != nil {
		t.Error("hvdgomlx.Trainable(nil) is not nil")
	}
}

// Without Trainable, simplego cannot differentiate MaxPool: the reason
// Trainable exists (this fails, and can go, once simplego can).
func TestSimplegoAloneCannotDifferentiateMaxPool(t *testing.T) {
	e, err := graph.NewExec(theBackend(), func(x *graph.Node) *graph.Node {
		return graph.Gradient(graph.ReduceAllSum(graph.MaxPool(x).Window(2).Done()), x)[0]
	})
	if err == nil {
		_, err = e.Exec(randND(rand.New(rand.NewPCG(1, 1)), 0, 1, 4, 4, 1).tensor())
	}
	if err == nil {
		t.Fatal("simplego differentiated MaxPool on its own")
	}
	t.Logf("simplego alone: %v", firstLine(err.Error()))
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

func TestTrainableReverse(t *testing.T) {
	x := randND(rand.New(rand.NewPCG(2, 1)), 0, 3, 4, 2)
	for _, axes := range [][]int{{0}, {1}, {0, 2}, {0, 1, 2}, {}} {
		got := run(t, func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.Reverse(in[0], axes...)} }, x)[0]
		want := newND(x.dims...)
		each(x.dims, func(idx []int) {
			src := append([]int(nil), idx...)
			for _, a := range axes {
				src[a] = x.dims[a] - 1 - idx[a]
			}
			want.v[want.off(idx)] = x.v[x.off(src)]
		})
		near(t, "Reverse", got, want.v, 0)
	}
}

// padRef is XLA's Pad: interior padding first, then edges, where a
// negative edge removes elements.
func padRef(x nd, fill float64, cfg []backends.PadAxis) nd {
	dims := make([]int, len(x.dims))
	for a, d := range x.dims {
		inner := d
		if d > 0 {
			inner = d + (d-1)*cfg[a].Interior
		}
		dims[a] = inner + cfg[a].Start + cfg[a].End
	}
	out := newND(dims...)
	for i := range out.v {
		out.v[i] = fill
	}
	each(x.dims, func(idx []int) {
		pos := make([]int, len(idx))
		for a, i := range idx {
			pos[a] = cfg[a].Start + i*(cfg[a].Interior+1)
			if pos[a] < 0 || pos[a] >= dims[a] {
				return
			}
		}
		out.v[out.off(pos)] = x.v[x.off(idx)]
	})
	return out
}

func TestTrainablePad(t *testing.T) {
	x := randND(rand.New(rand.NewPCG(3, 1)), 0, 3, 4, 2)
	for _, cfg := range [][]backends.PadAxis{
		{{Start: 1, End: 2}, {}, {Start: 0, End: 1}},
		{{Interior: 1}, {Interior: 2}, {}},
		{{Start: 2, End: -1, Interior: 1}, {Start: -1, End: 3, Interior: 2}, {Start: -1, End: -1}},
		{{Start: -2, End: 0}, {Start: 0, End: -3}, {}},
	} {
		got := run(t, func(in []*graph.Node) []*graph.Node {
			return []*graph.Node{graph.Pad(in[0], graph.Scalar(in[0].Graph(), in[0].DType(), 7.5), cfg...)}
		}, x)[0]
		near(t, "Pad", got, padRef(x, 7.5, cfg).v, 0)
	}
}

// scatterRef is the gradient of sum(w · pool(x)) for max (or min)
// pooling over [batch, h, w, c] with the given spatial windows, strides
// and paddings: each output's weight goes to the first extreme element of
// its window in row-major order, padding never chosen.
func scatterRef(x, w nd, window, strides [2]int, pads [2][2]int, isMax bool) nd {
	grad := newND(x.dims...)
	each(w.dims, func(o []int) {
		best, bi := math.NaN(), []int(nil)
		for dy := range window[0] {
			for dx := range window[1] {
				y, xx := o[1]*strides[0]+dy-pads[0][0], o[2]*strides[1]+dx-pads[1][0]
				if y < 0 || y >= x.dims[1] || xx < 0 || xx >= x.dims[2] {
					continue
				}
				idx := []int{o[0], y, xx, o[3]}
				v := x.v[x.off(idx)]
				if bi == nil || (isMax && v > best) || (!isMax && v < best) {
					best, bi = v, idx
				}
			}
		}
		grad.v[grad.off(bi)] += w.v[w.off(o)]
	})
	return grad
}

func TestTrainablePoolGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	for _, tc := range []struct {
		name    string
		dims    []int
		window  [2]int
		strides [2]int
		pads    [2][2]int
		levels  int // >0: few distinct values, so windows hold equal maxima
	}{
		{"2x2 stride 2", []int{2, 6, 4, 3}, [2]int{2, 2}, [2]int{2, 2}, [2][2]int{}, 0},
		{"2x2 stride 2 ties", []int{2, 6, 4, 3}, [2]int{2, 2}, [2]int{2, 2}, [2][2]int{}, 3},
		{"3x3 stride 1 padded, overlapping", []int{1, 5, 6, 2}, [2]int{3, 3}, [2]int{1, 1}, [2][2]int{{1, 1}, {1, 1}}, 4},
		{"3x2 stride 2x1 odd, padded at the end", []int{2, 5, 5, 1}, [2]int{3, 2}, [2]int{2, 1}, [2][2]int{{0, 2}, {1, 0}}, 0},
	} {
		for _, isMax := range []bool{true, false} {
			x := randND(r, tc.levels, tc.dims...)
			var w nd
			probe := func(in []*graph.Node) *graph.Node {
				p := graph.MinPool(in[0])
				if isMax {
					p = graph.MaxPool(in[0])
				}
				return p.WindowPerAxis(tc.window[:]...).StridePerAxis(tc.strides[:]...).
					PaddingPerDim([][2]int{tc.pads[0], tc.pads[1]}).Done()
			}
			// The pooled shape, from the forward pass alone.
			e, err := graph.NewExec(theBackend(), func(x *graph.Node) *graph.Node { return probe([]*graph.Node{x}) })
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Exec(x.tensor())
			if err != nil {
				t.Fatal(err)
			}
			w = randND(r, 0, out[0].Shape().Dimensions...)
			got := run(t, func(in []*graph.Node) []*graph.Node {
				loss := graph.ReduceAllSum(graph.Mul(probe(in), in[1]))
				return graph.Gradient(loss, in[0])
			}, x, w)[0]
			near(t, tc.name, got, scatterRef(x, w, tc.window, tc.strides, tc.pads, isMax).v, 1e-12)
		}
	}
}

// convForward is the convolution of x [b, h, w, c] with k [kh, kw, c, f].
func convForward(x, k nd, out []int, strides, dil [2]int, pads [2][2]int) nd {
	y := newND(out...)
	each(out, func(o []int) {
		var sum float64
		for dy := range k.dims[0] {
			for dx := range k.dims[1] {
				yy, xx := o[1]*strides[0]+dy*dil[0]-pads[0][0], o[2]*strides[1]+dx*dil[1]-pads[1][0]
				if yy < 0 || yy >= x.dims[1] || xx < 0 || xx >= x.dims[2] {
					continue
				}
				for c := range x.dims[3] {
					sum += x.v[x.off([]int{o[0], yy, xx, c})] * k.v[k.off([]int{dy, dx, c, o[3]})]
				}
			}
		}
		y.v[y.off(o)] = sum
	})
	return y
}

// convRef returns the gradients, with respect to x [b, h, w, c] and k
// [kh, kw, c, f], of sum(g · conv(x, k)), the convolution with the given
// strides and paddings.
func convRef(x, k, g nd, strides, dil [2]int, pads [2][2]int) (gx, gk nd) {
	gx, gk = newND(x.dims...), newND(k.dims...)
	each(g.dims, func(o []int) {
		gv := g.v[g.off(o)]
		for dy := range k.dims[0] {
			for dx := range k.dims[1] {
				y, xx := o[1]*strides[0]+dy*dil[0]-pads[0][0], o[2]*strides[1]+dx*dil[1]-pads[1][0]
				if y < 0 || y >= x.dims[1] || xx < 0 || xx >= x.dims[2] {
					continue
				}
				for c := range x.dims[3] {
					xi, ki := x.off([]int{o[0], y, xx, c}), k.off([]int{dy, dx, c, o[3]})
					gx.v[xi] += gv * k.v[ki]
					gk.v[ki] += gv * x.v[xi]
				}
			}
		}
	})
	return gx, gk
}

// The kernels are odd-sized: for even-sized ones (2×2, 3×2) the gradient
// with respect to the input came out wrong here, while that with respect
// to the kernel was right. That gradient is built by GoMLX v0.26.0's
// graph package (the padding of its reverse convolution), not by
// Trainable, which only supplies the Reverse it calls.
func TestTrainableConvolutionGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	for _, tc := range []struct {
		name    string
		x, k    []int
		strides [2]int
		pads    [2][2]int
		dil     [2]int
	}{
		{"3x3 same", []int{2, 5, 4, 3}, []int{3, 3, 3, 2}, [2]int{1, 1}, [2][2]int{{1, 1}, {1, 1}}, [2]int{}},
		{"5x5 same", []int{1, 7, 6, 2}, []int{5, 5, 2, 4}, [2]int{1, 1}, [2][2]int{{2, 2}, {2, 2}}, [2]int{}},
		{"3x5 valid", []int{2, 6, 7, 1}, []int{3, 5, 1, 3}, [2]int{1, 1}, [2][2]int{}, [2]int{}},
		{"3x3 stride 2 same", []int{2, 7, 7, 2}, []int{3, 3, 2, 2}, [2]int{2, 2}, [2][2]int{{1, 1}, {1, 1}}, [2]int{}},
		{"3x3 dilated 2x1 padded", []int{1, 8, 6, 2}, []int{3, 3, 2, 3}, [2]int{1, 1}, [2][2]int{{2, 2}, {1, 0}}, [2]int{2, 1}},
	} {
		if tc.dil == [2]int{} {
			tc.dil = [2]int{1, 1}
		}
		x, k := randND(r, 0, tc.x...), randND(r, 0, tc.k...)
		conv := func(in []*graph.Node) *graph.Node {
			return graph.Convolve(in[0], in[1]).StridePerDim(tc.strides[:]...).DilationPerDim(tc.dil[:]...).PaddingPerDim([][2]int{tc.pads[0], tc.pads[1]}).Done()
		}
		e, err := graph.NewExec(theBackend(), func(x, k *graph.Node) *graph.Node { return conv([]*graph.Node{x, k}) })
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Exec(x.tensor(), k.tensor())
		if err != nil {
			t.Fatal(err)
		}
		dims := out[0].Shape().Dimensions
		fwd := run(t, func(in []*graph.Node) []*graph.Node { return []*graph.Node{conv(in)} }, x, k)[0]
		want := convForward(x, k, dims, tc.strides, tc.dil, tc.pads)
		near(t, tc.name+": simplego's own convolution", tensors.MustCopyFlatData[float64](out[0]), want.v, 1e-12)
		near(t, tc.name+": the convolution", fwd, want.v, 1e-12)
		g := randND(r, 0, dims...)
		got := run(t, func(in []*graph.Node) []*graph.Node {
			return graph.Gradient(graph.ReduceAllSum(graph.Mul(conv(in), in[2])), in[0], in[1])
		}, x, k, g)
		gx, gk := convRef(x, k, g, tc.strides, tc.dil, tc.pads)
		near(t, tc.name+": gradient of x", got[0], gx.v, 1e-12)
		near(t, tc.name+": gradient of the kernel", got[1], gk.v, 1e-12)
	}
}
