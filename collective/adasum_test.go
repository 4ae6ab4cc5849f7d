package collective_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// refAdasumPair is the pairwise Adasum operator evaluated directly in
// float64: (1 - a·b/(2‖a‖²))·a + (1 - a·b/(2‖b‖²))·b, with the
// coefficient of a zero vector taken as 1.
func refAdasumPair(a, b []float64) []float64 {
	var dot, a2, b2 float64
	for i := range a {
		dot += a[i] * b[i]
		a2 += a[i] * a[i]
		b2 += b[i] * b[i]
	}
	ca, cb := 1.0, 1.0
	if a2 != 0 {
		ca = 1 - dot/(2*a2)
	}
	if b2 != 0 {
		cb = 1 - dot/(2*b2)
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = ca*a[i] + cb*b[i]
	}
	return out
}

// refAdasumTree is the Adasum of one tensor's vectors g (one per rank)
// along the tree AllreduceAdasum documents: with p the largest power of
// two not above n, rank r < n-p first folds in rank r+p, then the complete
// binary tree over ranks 0..p-1 in rank order, lower ranks on the left.
func refAdasumTree(g [][]float64) []float64 {
	n := len(g)
	p := 1
	for p*2 <= n {
		p *= 2
	}
	u := make([][]float64, p)
	copy(u, g[:p])
	for r := 0; r < n-p; r++ {
		u[r] = refAdasumPair(u[r], g[r+p])
	}
	for w := 1; w < p; w *= 2 {
		for r := 0; r < p; r += 2 * w {
			u[r] = refAdasumPair(u[r], u[r+w])
		}
	}
	return u[0]
}

// adasumInputs makes each rank's vector of total elements: a direction
// shared by all ranks plus noise of each rank's own, so that the vectors
// are far from orthogonal and the coefficients matter. Values are
// float32-representable, so float32 inputs are exactly the float64 ones.
func adasumInputs(rng *rand.Rand, n, total int) [][]float64 {
	common := make([]float64, total)
	for i := range common {
		common[i] = rng.Float64()*2 - 1
	}
	g := make([][]float64, n)
	for r := range g {
		g[r] = make([]float64, total)
		scale := 0.5 + rng.Float64() // ranks differ in length too
		for i := range g[r] {
			g[r][i] = float64(float32(scale * (common[i] + 0.7*(rng.Float64()*2-1))))
		}
	}
	return g
}

// refAdasum evaluates refAdasumTree tensor by tensor over the buffer.
func refAdasum(g [][]float64, counts []int) []float64 {
	total := len(g[0])
	if counts == nil {
		counts = []int{total}
	}
	out := make([]float64, 0, total)
	off := 0
	for _, k := range counts {
		part := make([][]float64, len(g))
		for r := range g {
			part[r] = g[r][off : off+k]
		}
		out = append(out, refAdasumTree(part)...)
		off += k
	}
	return out
}

func encode(dt kernels.DType, v []float64) []byte {
	b := make([]byte, len(v)*dt.Size())
	fill(dt, b, func(i int) float64 { return v[i] })
	return b
}

// runAdasum all-reduces each rank's g with AllreduceAdasum and returns
// every rank's result buffer, failing the test on any error.
func runAdasumAll(t *testing.T, cs []*collective.Comm, dt kernels.DType, g [][]float64, counts []int) [][]byte {
	t.Helper()
	bufs := make([][]byte, len(cs))
	for r := range cs {
		bufs[r] = encode(dt, g[r])
	}
	errs := onAll(t, cs, 20*time.Second, func(r int, c *collective.Comm) error {
		return c.AllreduceAdasum(context.Background(), dt, bufs[r], counts, collective.ReduceOptions{})
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return bufs
}

// sameOnAll fails unless every rank's buffer is rank 0's, bit for bit.
func sameOnAll(t *testing.T, what string, bufs [][]byte) {
	t.Helper()
	for r := 1; r < len(bufs); r++ {
		if !bytes.Equal(bufs[r], bufs[0]) {
			t.Fatalf("%s: rank %d's result differs from rank 0's", what, r)
		}
	}
}

// adasumTolerance bounds the error of AllreduceAdasum against the direct
// float64 evaluation, relative to the largest element of the tensor's
// result. float64: the only differences are the order in which dot
// products and norms are summed (split over ranks, then added up) and
// rounding in the combinations, each a few ulps (1.1e-16) times the
// length summed over in the worst case; 1e-12 leaves a margin of 10x over
// a 1009-element tensor's 1009·1.1e-16 ≈ 1.1e-13. float32: every level
// (at most three levels and a fold at 8 ranks) rounds the combined vector
// to float32 (6e-8 relative), an error later levels carry on scaled by
// coefficients below about 2; 1e-5 is a margin of about 10x over that.
func adasumTolerance(dt kernels.DType) float64 {
	if dt == kernels.F32 {
		return 1e-5
	}
	return 1e-12
}

// checkAdasum compares a rank's result with the reference, tensor by
// tensor, relative to each tensor's largest reference element.
func checkAdasum(t *testing.T, what string, dt kernels.DType, got []byte, want []float64, counts []int) {
	t.Helper()
	if counts == nil {
		counts = []int{len(want)}
	}
	tol := adasumTolerance(dt)
	off := 0
	for ti, k := range counts {
		scale := 0.0
		for _, w := range want[off : off+k] {
			scale = max(scale, math.Abs(w))
		}
		for i := off; i < off+k; i++ {
			if d := math.Abs(value(dt, got, i) - want[i]); d > tol*scale || math.IsNaN(d) {
				t.Fatalf("%s: tensor %d element %d = %v, want %v (error %.3g of the tensor's max %.3g, tolerance %.0g)",
					what, ti, i-off, value(dt, got, i), want[i], d/scale, scale, tol)
			}
		}
		off += k
	}
}

// adasumLayouts are the tensor layouts the tests reduce: one tensor, and
// several with empty and one-element tensors, some shorter than the
// number of ranks (so that ranks hold empty ranges at the last levels).
var adasumLayouts = []struct {
	total  int
	counts []int
}{
	{1, nil},
	{5, nil},
	{1009, nil},
	{1009, []int{3, 0, 500, 1, 17, 488}},
	{64, []int{1, 1, 1, 61}},
}

// TestAdasumMatchesTree: np 1..8 (odd and other non-powers of two
// included) × float32 and float64 × the layouts, over each transport:
// every rank's result matches the direct float64 evaluation of the
// documented tree and all ranks agree bit for bit.
func TestAdasumMatchesTree(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for n := 1; n <= 8; n++ {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 256, InlineBytes: 1024})
				rng := rand.New(rand.NewPCG(uint64(n), 33))
				for _, dt := range []kernels.DType{kernels.F32, kernels.F64} {
					for _, l := range adasumLayouts {
						g := adasumInputs(rng, n, l.total)
						want := refAdasum(g, l.counts)
						bufs := runAdasumAll(t, cs, dt, g, l.counts)
						what := fmt.Sprintf("%v %d elements in %v", dt, l.total, l.counts)
						sameOnAll(t, what, bufs)
						checkAdasum(t, what, dt, bufs[0], want, l.counts)
					}
				}
			})
		}
	}
}

// TestAdasumOfEqualVectorsIsThatVector: Adasum(a, a) = a. Every rank's
// dot product and squared norm are the same sums, so the coefficients are
// exactly 1/2 and the result is exactly a, at every size.
func TestAdasumOfEqualVectorsIsThatVector(t *testing.T) {
	for n := 1; n <= 8; n++ {
		cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		a := adasumInputs(rng, 1, 777)[0]
		g := make([][]float64, n)
		for r := range g {
			g[r] = a
		}
		for _, dt := range []kernels.DType{kernels.F32, kernels.F64} {
			bufs := runAdasumAll(t, cs, dt, g, []int{700, 77})
			sameOnAll(t, "equal vectors", bufs)
			if want := encode(dt, a); !bytes.Equal(bufs[0], want) {
				t.Fatalf("n=%d %v: Adasum of equal vectors is not that vector", n, dt)
			}
		}
	}
}

// TestAdasumOfOrthogonalVectorsIsTheSum: vectors with disjoint supports
// (rank r's nonzero elements are those i with i mod n = r) have zero dot
// products, so Adasum adds them: exactly, as each element's sum has one
// nonzero term. A tensor that is zero on every rank stays zero (the
// zero-norm case) and one that is zero on some ranks only is their sum.
func TestAdasumOfOrthogonalVectorsIsTheSum(t *testing.T) {
	for n := 1; n <= 8; n++ {
		cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
		const total = 300
		counts := []int{100, 100, 100} // disjoint supports; zero everywhere; nonzero on rank 0 only
		g := make([][]float64, n)
		want := make([]float64, total)
		for r := range g {
			g[r] = make([]float64, total)
			for i := range 100 {
				if i%n == r {
					g[r][i] = float64(i + 1)
					want[i] = float64(i + 1)
				}
			}
		}
		for i := 200; i < total; i++ {
			g[0][i] = float64(i)
			want[i] = float64(i)
		}
		for _, dt := range []kernels.DType{kernels.F32, kernels.F64} {
			bufs := runAdasumAll(t, cs, dt, g, counts)
			sameOnAll(t, "orthogonal vectors", bufs)
			if w := encode(dt, want); !bytes.Equal(bufs[0], w) {
				for i := range total {
					if value(dt, bufs[0], i) != want[i] {
						t.Fatalf("n=%d %v: element %d = %v, want %v", n, dt, i, value(dt, bufs[0], i), want[i])
					}
				}
			}
		}
	}
}

// TestAdasumThroughAllreduce: Allreduce with op Adasum is AllreduceAdasum
// of one tensor, and AllreduceVec with op Adasum is AllreduceAdasum with
// one tensor per part, bit for bit; Prescale and Postscale apply as in
// any all-reduce (Adasum commutes with a common scale).
func TestAdasumThroughAllreduce(t *testing.T) {
	const n = 5
	cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
	rng := rand.New(rand.NewPCG(5, 5))
	g := adasumInputs(rng, n, 600)
	counts := []int{200, 1, 399}
	dt := kernels.F64
	whole := runAdasumAll(t, cs, dt, g, nil)
	parted := runAdasumAll(t, cs, dt, g, counts)

	bufs := make([][]byte, n)
	parts := make([][][]byte, n)
	for r := range n {
		bufs[r] = encode(dt, g[r])
		b := encode(dt, g[r])
		parts[r] = [][]byte{b[:200*8], b[200*8 : 201*8], b[201*8:]}
	}
	o := collective.ReduceOptions{Prescale: 2, Postscale: 0.25}
	errs := onAll(t, cs, 20*time.Second, func(r int, c *collective.Comm) error {
		if err := c.Allreduce(context.Background(), dt, bufs[r], kernels.Adasum, o); err != nil {
			return err
		}
		return c.AllreduceVec(context.Background(), dt, parts[r], kernels.Adasum, collective.ReduceOptions{})
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for i := range 600 {
		if got, want := value(dt, bufs[0], i), value(dt, whole[0], i)/2; got != want {
			t.Fatalf("Allreduce Adasum ×2 ×0.25: element %d = %v, want %v", i, got, want)
		}
	}
	for r := range n {
		joined := bytes.Join(parts[r], nil)
		if !bytes.Equal(joined, parted[0]) {
			t.Fatalf("rank %d: AllreduceVec Adasum differs from AllreduceAdasum with one tensor per part", r)
		}
	}
	if bytes.Equal(parted[0], whole[0]) {
		t.Fatal("one tensor per part gave the result of one tensor: coefficients were not per tensor")
	}
}

// TestAdasumInvalid: Adasum of integers, tensor counts that do not add up
// to the buffer, and a reduce-scatter with Adasum are argument errors that
// fail every rank.
func TestAdasumInvalid(t *testing.T) {
	cases := []struct {
		name string
		f    func(c *collective.Comm) error
		want error
	}{
		{"int32", func(c *collective.Comm) error {
			return c.AllreduceAdasum(context.Background(), kernels.I32, make([]byte, 16), nil, collective.ReduceOptions{})
		}, kernels.ErrDType},
		{"counts", func(c *collective.Comm) error {
			return c.AllreduceAdasum(context.Background(), kernels.F32, make([]byte, 16), []int{1, 2}, collective.ReduceOptions{})
		}, collective.ErrInvalid},
		{"negative count", func(c *collective.Comm) error {
			return c.AllreduceAdasum(context.Background(), kernels.F32, make([]byte, 16), []int{5, -1}, collective.ReduceOptions{})
		}, collective.ErrInvalid},
		{"reducescatter", func(c *collective.Comm) error {
			return c.ReduceScatter(context.Background(), kernels.F32, make([]byte, 16), nil, kernels.Adasum, collective.ReduceOptions{})
		}, kernels.ErrOp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := meshtest.Comms(t, meshtest.Mem, 3, collective.Options{})
			errs := onAll(t, cs, 5*time.Second, func(r int, c *collective.Comm) error { return tc.f(c) })
			for r, err := range errs {
				if !errors.Is(err, collective.ErrInvalid) || !errors.Is(err, tc.want) {
					t.Fatalf("rank %d: %v, want ErrInvalid and %v", r, err, tc.want)
				}
			}
		})
	}
}

// TestAdasumPeerFails: a rank that leaves in the middle of an Adasum
// all-reduce fails the others' with an error, not a hang.
func TestAdasumPeerFails(t *testing.T) {
	const n = 6
	cs := meshtest.Comms(t, meshtest.Mem, n, collective.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
		buf := make([]byte, 1<<20)
		if r == 3 {
			c.Abort(errors.New("rank 3 gives up"))
			return nil
		}
		return c.AllreduceAdasum(ctx, kernels.F32, buf, nil, collective.ReduceOptions{})
	})
	for r, err := range errs {
		if r != 3 && err == nil {
			t.Fatalf("rank %d succeeded without rank 3", r)
		}
	}
}
