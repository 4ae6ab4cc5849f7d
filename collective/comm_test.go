package collective_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// onAll runs f on every rank at once and returns the per-rank errors. It
// fails the test if the ranks have not all returned within limit.
func onAll(t *testing.T, cs []*collective.Comm, limit time.Duration, f func(rank int, c *collective.Comm) error) []error {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() { errs[r] = f(r, c) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("ranks did not return within %v", limit)
	}
	return errs
}

// input is the closed-form value rank r contributes at element i for op:
// small integers, so sums, products, minima and maxima are exact in every
// dtype (float16 and bfloat16 included) for up to 16 ranks.
func input(op kernels.Op, r, i int) float64 {
	switch op {
	case kernels.Prod:
		if (r+i)%8 == 0 {
			return 2
		}
		return 1
	case kernels.Min, kernels.Max:
		return float64((r*7+i*3)%11 + 1)
	default:
		return float64(r + 1 + i%3)
	}
}

// expected is the closed-form result at element i over n ranks.
func expected(dt kernels.DType, op kernels.Op, n, i int) float64 {
	switch op {
	case kernels.Prod:
		k := 0
		for r := range n {
			if (r+i)%8 == 0 {
				k++
			}
		}
		return math.Ldexp(1, k)
	case kernels.Min, kernels.Max:
		v := input(op, 0, i)
		for r := 1; r < n; r++ {
			if op == kernels.Min {
				v = math.Min(v, input(op, r, i))
			} else {
				v = math.Max(v, input(op, r, i))
			}
		}
		return v
	}
	sum := float64(n*(n+1)/2 + n*(i%3))
	if op == kernels.Average {
		if !dt.IsFloat() {
			return math.RoundToEven(sum / float64(n))
		}
		return sum / float64(n)
	}
	return sum
}

// tolerance: exact except for the rounding of Average in narrow floats.
func tolerance(dt kernels.DType, op kernels.Op) float64 {
	if op != kernels.Average {
		return 0
	}
	switch dt {
	case kernels.F16:
		return 1e-3
	case kernels.BF16:
		return 8e-3
	case kernels.F32:
		return 1e-6
	}
	return 1e-12
}

// fill and read convert between float64 values and a dtype's bytes.
func fill(dt kernels.DType, b []byte, f func(i int) float64) {
	switch dt {
	case kernels.F32:
		for i, s := 0, kernels.FromBytes[float32](b); i < len(s); i++ {
			s[i] = float32(f(i))
		}
	case kernels.F64:
		for i, s := 0, kernels.FromBytes[float64](b); i < len(s); i++ {
			s[i] = f(i)
		}
	case kernels.F16:
		for i, s := 0, kernels.FromBytes[kernels.Float16](b); i < len(s); i++ {
			s[i] = kernels.ToFloat16(float32(f(i)))
		}
	case kernels.BF16:
		for i, s := 0, kernels.FromBytes[kernels.BFloat16](b); i < len(s); i++ {
			s[i] = kernels.ToBFloat16(float32(f(i)))
		}
	case kernels.I32:
		for i, s := 0, kernels.FromBytes[int32](b); i < len(s); i++ {
			s[i] = int32(f(i))
		}
	case kernels.I64:
		for i, s := 0, kernels.FromBytes[int64](b); i < len(s); i++ {
			s[i] = int64(f(i))
		}
	case kernels.U8:
		for i := range b {
			b[i] = uint8(f(i))
		}
	}
}

func value(dt kernels.DType, b []byte, i int) float64 {
	switch dt {
	case kernels.F32:
		return float64(kernels.FromBytes[float32](b)[i])
	case kernels.F64:
		return kernels.FromBytes[float64](b)[i]
	case kernels.F16:
		return float64(kernels.FromBytes[kernels.Float16](b)[i].Float32())
	case kernels.BF16:
		return float64(kernels.FromBytes[kernels.BFloat16](b)[i].Float32())
	case kernels.I32:
		return float64(kernels.FromBytes[int32](b)[i])
	case kernels.I64:
		return float64(kernels.FromBytes[int64](b)[i])
	}
	return float64(b[i])
}

// wrong counts the elements of b that differ from want beyond tol on
// either side and describes the first one; b holds elements first,
// first+1, ... of the result.
func wrong(dt kernels.DType, b []byte, first int, want func(i int) float64, tol float64) (int, string) {
	bad, desc := 0, ""
	for i := range len(b) / dt.Size() {
		got, w := value(dt, b, i), want(first+i)
		if math.Abs(got-w) > tol*math.Abs(w) {
			if bad == 0 {
				desc = fmt.Sprintf("element %d = %v, want %v", first+i, got, w)
			}
			bad++
		}
	}
	return bad, desc
}

// period is a period of input and expected in the element index
// (lcm of 3, 8 and 11), so buffers are filled by repeating one period.
const period = 264

// fillPeriodic writes f(i mod period) into every element of b.
func fillPeriodic(dt kernels.DType, b []byte, f func(i int) float64) {
	n := len(b) / dt.Size()
	fill(dt, b[:min(n, period)*dt.Size()], f)
	for done := period * dt.Size(); done < len(b); done *= 2 {
		copy(b[done:], b[:done])
	}
}

// allreduceCase runs one all-reduce on every rank and checks every element
// of every rank (see checkReduced).
func allreduceCase(t *testing.T, cs []*collective.Comm, dt kernels.DType, op kernels.Op, count int) {
	t.Helper()
	n := len(cs)
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = make([]byte, count*dt.Size())
		fillPeriodic(dt, bufs[r], func(i int) float64 { return input(op, r, i) })
	}
	errs := onAll(t, cs, 60*time.Second, func(r int, c *collective.Comm) error {
		return c.Allreduce(context.Background(), dt, bufs[r], op, collective.ReduceOptions{})
	})
	meshtest.MustAll(t, errs)
	exact := make([]byte, count*dt.Size())
	fillPeriodic(dt, exact, func(i int) float64 { return expected(dt, op, n, i) })
	for r := range bufs {
		checkReduced(t, fmt.Sprintf("%v %v n=%d count=%d rank %d", dt, op, n, count, r), dt, op, n, bufs[r], exact, 0)
	}
}

// checkReduced fails t unless got, elements first, first+1, ... of the
// result of op over n ranks, holds the closed-form values (exact holds
// them in dt): byte for byte, except Average in floats, whose 1/n scaling
// may round and which must then lie within tolerance of the value on
// either side.
func checkReduced(t *testing.T, what string, dt kernels.DType, op kernels.Op, n int, got, exact []byte, first int) {
	t.Helper()
	if bytes.Equal(got, exact) {
		return
	}
	tol := tolerance(dt, op)
	want := func(i int) float64 { return expected(dt, op, n, i) }
	if bad, desc := wrong(dt, got, first, want, tol); bad > 0 || tol == 0 {
		t.Fatalf("%s: %d wrong, first %s", what, bad, desc)
	}
}

var commSizes = []int{1, 2, 3, 4, 5, 6, 7, 8, 16}

func smallCounts(n int) []int { return []int{0, 1, max(n-1, 0), n + 1, 1009} }

// TestAllreduceMatrix: sizes × counts × every dtype × every op, against
// closed-form values, on both transports. Small segments force the
// pipelined executor to interleave many segments even for small counts.
func TestAllreduceMatrix(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 512, InlineBytes: 1024})
				for _, count := range smallCounts(n) {
					for _, dt := range kernels.DTypes {
						for _, op := range kernels.Ops {
							allreduceCase(t, cs, dt, op, count)
						}
					}
				}
			})
		}
	}
}

// TestAllreduceMillion: 10^6 elements, default options, sizes 1..8 and 16
// × every dtype × every op on both transports. Under the race detector
// (which checks concurrency, not arithmetic, and slows element loops ~20×)
// it runs a slice of the matrix; test.sh runs the whole matrix without it.
func TestAllreduceMillion(t *testing.T) {
	sizes, dtypes, ops := commSizes, kernels.DTypes, kernels.Ops
	if raceEnabled || testing.Short() {
		sizes = []int{2, 5, 16}
		dtypes = []kernels.DType{kernels.F32, kernels.BF16, kernels.I64}
		ops = []kernels.Op{kernels.Sum, kernels.Max}
		t.Logf("reduced matrix (race detector or -short): sizes %v, dtypes %v, ops %v", sizes, dtypes, ops)
	}
	for _, tr := range meshtest.Kinds() {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{})
				for _, dt := range dtypes {
					for _, op := range ops {
						allreduceCase(t, cs, dt, op, 1_000_000)
					}
				}
			})
		}
	}
}
