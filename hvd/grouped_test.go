package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

// onJobs runs f on every rank of jobs of 1, 2, 3 and 4 ranks, one subtest
// each.
func onJobs(t *testing.T, f func(n, r int, rt *hvd.Runtime) error) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			each(t, rts, func(r int, rt *hvd.Runtime) error { return f(n, r, rt) })
		})
	}
}

// TestGroupedAllgatherClosedForm: rank r contributes r+1 rows of a, whose
// element i is 100r+i, and one row of b holding 10r; the gathered tensors
// are the ranks' rows in rank order, whatever order each rank lists the
// members in.
func TestGroupedAllgatherClosedForm(t *testing.T) {
	onJobs(t, func(n, r int, rt *hvd.Runtime) error {
		av := make([]int32, 2*(r+1))
		for i := range av {
			av[i] = int32(100*r + i)
		}
		a := hvd.NewTensor("ga/a", av, r+1, 2)
		b := hvd.NewTensor("ga/b", []float64{float64(10 * r)}, 1)
		ts := []*hvd.Tensor{a, b}
		if r%2 == 1 {
			ts = []*hvd.Tensor{b, a}
		}
		for step := range 2 { // the second time through, the response cache answers
			outs, err := rt.GroupedAllgather(context.Background(), ts)
			if err != nil {
				return err
			}
			ga, gb := outs[0], outs[1]
			if r%2 == 1 {
				ga, gb = gb, ga
			}
			var wantA []int32
			var wantB []float64
			for q := range n {
				for i := range 2 * (q + 1) {
					wantA = append(wantA, int32(100*q+i))
				}
				wantB = append(wantB, float64(10*q))
			}
			if got := hvd.Values[int32](ga); !slices.Equal(got, wantA) || !slices.Equal(ga.Shape, []int{n * (n + 1) / 2, 2}) || ga.Name != "ga/a" {
				return fmt.Errorf("step %d: a = %v shape %v name %q, want %v", step, got, ga.Shape, ga.Name, wantA)
			}
			if got := hvd.Values[float64](gb); !slices.Equal(got, wantB) || !slices.Equal(gb.Shape, []int{n}) {
				return fmt.Errorf("step %d: b = %v shape %v, want %v", step, got, gb.Shape, wantB)
			}
			if got := hvd.Values[int32](a); got[0] != int32(100*r) {
				return fmt.Errorf("the input changed: %v", got)
			}
		}
		return nil
	})
}

// TestGroupedReduceScatterClosedForm: c (7 rows) holds 10r+i on rank r, so
// row i sums to 10·n(n-1)/2 + n·i, and each rank keeps its rows (earlier
// ranks take the extra ones); d (2n rows of 3) holds r+i and its maximum,
// halved by the postscale, is (n-1+i)/2.
func TestGroupedReduceScatterClosedForm(t *testing.T) {
	onJobs(t, func(n, r int, rt *hvd.Runtime) error {
		cv := make([]int64, 7)
		for i := range cv {
			cv[i] = int64(10*r + i)
		}
		dv := make([]float32, 2*n*3)
		for i := range dv {
			dv[i] = float32(r + i)
		}
		c, d := hvd.NewTensor("rs/c", cv), hvd.NewTensor("rs/d", dv, 2*n, 3)
		// Sum for c, Max with a postscale for d: two calls, each a group
		// of one op; then c and d together under Sum.
		hs := rt.GroupedReduceScatterAsync([]*hvd.Tensor{c}, kernels.Sum, hvd.ReduceOptions{})
		hd := rt.GroupedReduceScatterAsync([]*hvd.Tensor{d}, kernels.Max, hvd.ReduceOptions{Postscale: 0.5})
		if err := hs[0].Wait(context.Background()); err != nil {
			return err
		}
		if err := hd[0].Wait(context.Background()); err != nil {
			return err
		}
		first, rows := 0, 0 // this rank's rows of c
		for q := range n {
			k := 7 / n
			if q < 7%n {
				k++
			}
			if q == r {
				rows = k
				break
			}
			first += k
		}
		var wantC []int64
		for i := first; i < first+rows; i++ {
			wantC = append(wantC, int64(10*n*(n-1)/2+n*i))
		}
		if got := hvd.Values[int64](hs[0].Output()); !slices.Equal(got, wantC) {
			return fmt.Errorf("c share = %v, want %v", got, wantC)
		}
		var wantD []float32
		for i := 6 * r; i < 6*(r+1); i++ { // two rows of three each
			wantD = append(wantD, float32(n-1+i)/2)
		}
		if got := hd[0].Output(); !slices.Equal(hvd.Values[float32](got), wantD) || !slices.Equal(got.Shape, []int{2, 3}) {
			return fmt.Errorf("d share = %v shape %v, want %v", hvd.Values[float32](got), got.Shape, wantD)
		}
		outs, err := rt.GroupedReduceScatter(context.Background(), []*hvd.Tensor{d, c}, kernels.Sum, hvd.ReduceOptions{})
		if err != nil {
			return err
		}
		if got := hvd.Values[int64](outs[1]); !slices.Equal(got, wantC) {
			return fmt.Errorf("grouped c share = %v, want %v", got, wantC)
		}
		for j, v := range hvd.Values[float32](outs[0]) {
			i := 6*r + j
			if want := float32(n*(n-1)/2 + n*i); v != want {
				return fmt.Errorf("grouped d share[%d] = %v, want %v", j, v, want)
			}
		}
		for i, v := range hvd.Values[int64](c) {
			if v != int64(10*r+i) {
				return fmt.Errorf("the input changed: %v", hvd.Values[int64](c))
			}
		}
		return nil
	})
}

// TestGroupedFailsTogether: when ranks disagree about one member's shape,
// every member of the group fails on every rank with ErrMismatch, the
// healthy one included, and the runtime goes on working.
func TestGroupedFailsTogether(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("np%d", n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			each(t, rts, func(r int, rt *hvd.Runtime) error {
				ctx := context.Background()
				cols := 2
				if r == n-1 {
					cols = 3 // all-gathers may differ in rows only
				}
				good := hvd.NewTensor("ff/good", []float32{1, 2})
				bad := hvd.NewTensor("ff/bad", make([]float32, cols), 1, cols)
				hs := rt.GroupedAllgatherAsync([]*hvd.Tensor{good, bad})
				for i, h := range hs {
					if err := h.Wait(ctx); !errors.Is(err, hvd.ErrMismatch) {
						return fmt.Errorf("all-gather member %d: %v, want ErrMismatch", i, err)
					}
					if h.Output() != nil {
						return fmt.Errorf("all-gather member %d failed with an Output", i)
					}
				}
				rows := 4 + r // reduce-scatters must agree on every dimension
				outs, err := rt.GroupedReduceScatter(ctx, []*hvd.Tensor{
					hvd.NewTensor("ff/rs-bad", make([]int32, rows)),
					hvd.NewTensor("ff/rs-good", []int32{1, 2, 3, 4}),
				}, kernels.Sum, hvd.ReduceOptions{})
				if !errors.Is(err, hvd.ErrMismatch) || outs != nil {
					return fmt.Errorf("reduce-scatter group: %v, %v; want ErrMismatch", outs, err)
				}
				got, err := rt.GroupedAllgather(ctx, []*hvd.Tensor{hvd.NewTensor("ff/after", []int32{int32(r)})})
				if err != nil {
					return err
				}
				if v := hvd.Values[int32](got[0]); len(v) != n || v[n-1] != int32(n-1) {
					return fmt.Errorf("all-gather after the failures = %v", v)
				}
				return nil
			})
		})
	}
}

// TestGroupedInvalidArguments: a nil or malformed member, or a name given
// twice, fails every handle of the group at once with ErrInvalidArgument,
// submitting nothing.
func TestGroupedInvalidArguments(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	ctx := context.Background()
	x := hvd.NewTensor("x", []float32{1})
	groups := map[string][]*hvd.Tensor{
		"nil member":   {x, nil},
		"twice":        {x, hvd.NewTensor("x", []float32{2})},
		"short buffer": {x, {Name: "y", DType: kernels.F32, Shape: []int{3}, Data: make([]byte, 4)}},
	}
	for what, ts := range groups {
		calls := map[string][]*hvd.Handle{
			"allreduce":     rt.GroupedAllreduceAsync(ts, kernels.Sum, hvd.ReduceOptions{}),
			"allgather":     rt.GroupedAllgatherAsync(ts),
			"reducescatter": rt.GroupedReduceScatterAsync(ts, kernels.Sum, hvd.ReduceOptions{}),
		}
		for op, hs := range calls {
			if len(hs) != len(ts) {
				t.Fatalf("%s, %s: %d handles for %d tensors", what, op, len(hs), len(ts))
			}
			for i, h := range hs {
				if err := h.Wait(ctx); !errors.Is(err, hvd.ErrInvalidArgument) {
					t.Errorf("%s, %s, member %d: %v, want ErrInvalidArgument", what, op, i, err)
				}
			}
		}
	}
	// nothing was left in flight under x's name
	if err := rt.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		t.Fatal(err)
	}
	if outs, err := rt.GroupedAllgather(ctx, nil); err != nil || len(outs) != 0 {
		t.Fatalf("an empty group: %v, %v", outs, err)
	}
}

// TestPackageLevelGroupedAndInto: the package-level forms fail with
// ErrNotInitialized before Init and run on the default runtime (one rank)
// after it.
func TestPackageLevelGroupedAndInto(t *testing.T) {
	ctx := context.Background()
	if err := hvd.Shutdown(); err != nil {
		t.Fatal(err)
	}
	calls := func() map[string]func() ([]float32, error) {
		v := func(ts []*hvd.Tensor, err error) ([]float32, error) {
			if err != nil {
				return nil, err
			}
			return hvd.Values[float32](ts[0]), nil
		}
		wait := func(hs []*hvd.Handle) ([]float32, error) {
			if err := hs[0].Wait(ctx); err != nil {
				return nil, err
			}
			return hvd.Values[float32](hs[0].Output()), nil
		}
		x := func() *hvd.Tensor { return hvd.NewTensor("pl/x", []float32{3, 4}) }
		return map[string]func() ([]float32, error){
			"GroupedAllgather": func() ([]float32, error) { return v(hvd.GroupedAllgather(ctx, []*hvd.Tensor{x()})) },
			"GroupedAllgatherAsync": func() ([]float32, error) {
				return wait(hvd.GroupedAllgatherAsync([]*hvd.Tensor{x()}))
			},
			"GroupedReduceScatter": func() ([]float32, error) {
				return v(hvd.GroupedReduceScatter(ctx, []*hvd.Tensor{x()}, kernels.Sum, hvd.ReduceOptions{}))
			},
			"GroupedReduceScatterAsync": func() ([]float32, error) {
				return wait(hvd.GroupedReduceScatterAsync([]*hvd.Tensor{x()}, kernels.Sum, hvd.ReduceOptions{}))
			},
			"AllreduceInto": func() ([]float32, error) {
				out := hvd.NewTensor("o", make([]float32, 2))
				return hvd.Values[float32](out), hvd.AllreduceInto(ctx, x(), out, kernels.Sum, hvd.ReduceOptions{})
			},
			"AllreduceIntoAsync": func() ([]float32, error) {
				h := hvd.AllreduceIntoAsync(x(), hvd.NewTensor("o", make([]float32, 2)), kernels.Sum, hvd.ReduceOptions{})
				return wait([]*hvd.Handle{h})
			},
		}
	}
	for name, call := range calls() {
		if _, err := call(); !errors.Is(err, hvd.ErrNotInitialized) {
			t.Errorf("%s before Init: %v, want ErrNotInitialized", name, err)
		}
	}
	t.Setenv(jobenv.EnvRank, "")
	if err := hvd.Init(ctx); err != nil {
		t.Fatal(err)
	}
	defer hvd.Shutdown()
	for name, call := range calls() {
		if got, err := call(); err != nil || !slices.Equal(got, []float32{3, 4}) {
			t.Errorf("%s on one rank: %v, %v; want [3 4]", name, got, err)
		}
	}
}
