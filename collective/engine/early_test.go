package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// earlyRun runs steps single all-reduces of one name on n engines over
// mk, every rank submitting once per step (rank delay(rank, step) later,
// if delay is set) and waiting without a deadline, and returns each
// rank's result bytes per step and each rank's statistics.
func earlyRun(t *testing.T, mk meshtest.Func, n int, noEarly bool, req Request, steps int,
	input func(rank, step int) []byte, delay func(rank, step int) time.Duration) ([][][]byte, []Stats) {
	t.Helper()
	cs := meshtest.Comms(t, mk, n, collective.Options{})
	cfg := DefaultConfig()
	cfg.CycleTime = 200 * time.Microsecond
	cfg.noEarly = noEarly
	es := make([]*Engine, n)
	for r, c := range cs {
		es[r] = New(c, cfg)
	}
	out := make([][][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, e := range es {
		wg.Go(func() {
			for s := range steps {
				if delay != nil {
					time.Sleep(delay(r, s))
				}
				buf := input(r, s)
				h := e.SubmitDriven(req, buf)
				if err := h.Wait(context.Background()); err != nil {
					errs[r] = fmt.Errorf("step %d: %w", s, err)
					return
				}
				out[r] = append(out[r], buf)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the ranks still run after 60 s")
	}
	stats := make([]Stats, n)
	for r, e := range es {
		e.Shutdown()
		stats[r] = e.Stats()
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
	}
	return out, stats
}

// floatInput is rank's input of a step: 256 values of dt drawn from a
// seeded source, so that sums round differently in different orders.
func floatInput(dt kernels.DType) func(rank, step int) []byte {
	return func(rank, step int) []byte {
		rng := rand.New(rand.NewPCG(uint64(rank), uint64(step)))
		switch dt {
		case kernels.F32:
			v := make([]float32, 256)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6))))
			}
			return kernels.AsBytes(v)
		case kernels.I32:
			v := make([]int32, 256)
			for i := range v {
				v[i] = rng.Int32N(1000) - 500
			}
			return kernels.AsBytes(v)
		}
		v := make([]float64, 256)
		for i := range v {
			v[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)))
		}
		return kernels.AsBytes(v)
	}
}

// TestEarlyAllreduce: a step of one small all-reduce from the response
// cache completes within the negotiation exchange (Stats.Early) from the
// third step on, on every rank, and its results equal, bit for bit, those
// of the same steps without the early path (which runs Comm.Allreduce):
// float sums whose rounding depends on the order, prescale and postscale,
// average, max, integers; 2, 3 (a rank folded in) and 5 ranks, in memory
// and over TCP, and 2 over shared memory. With 2 ranks and no prescale the
// data travel after the control vector and are reduced where they lie
// (earlyAllreduce.apart); with a prescale, or more ranks, in the vector.
// Integer sums are checked against the arithmetic too.
func TestEarlyAllreduce(t *testing.T) {
	const steps = 8
	cases := []struct {
		dt        kernels.DType
		op        kernels.Op
		pre, post float64
	}{
		{kernels.F64, kernels.Sum, 0, 0},
		{kernels.F32, kernels.Sum, 0.5, 3},
		{kernels.F64, kernels.Average, 0, 0},
		{kernels.F32, kernels.Max, 0, 0},
		{kernels.I32, kernels.Sum, 0, 0},
	}
	for _, mesh := range []struct {
		name string
		mk   meshtest.Func
		ns   []int
	}{{"mem", meshtest.Mem, []int{2, 3, 5}}, {"tcp", meshtest.TCP, []int{2, 3}}, {"shm", meshtest.Shm, []int{2}}} {
		for _, n := range mesh.ns {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%d/%v-%v-%v-%v", mesh.name, n, c.dt, c.op, c.pre, c.post), func(t *testing.T) {
					req := Request{Name: "metric", Kind: KindAllreduce, DType: c.dt, ReduceOp: c.op, Shape: []int{256},
						Prescale: c.pre, Postscale: c.post}
					early, st := earlyRun(t, mesh.mk, n, false, req, steps, floatInput(c.dt), nil)
					plain, pst := earlyRun(t, mesh.mk, n, true, req, steps, floatInput(c.dt), nil)
					for r := range n {
						if st[r].Early < steps-2 || pst[r].Early != 0 {
							t.Fatalf("rank %d: %d of %d steps early, %d without the early path; want at least %d and 0",
								r, st[r].Early, steps, pst[r].Early, steps-2)
						}
						for s := range steps {
							if string(early[r][s]) != string(plain[r][s]) || string(early[r][s]) != string(early[0][s]) {
								t.Fatalf("rank %d step %d: the early result differs from Comm.Allreduce's or rank 0's", r, s)
							}
						}
					}
					if c.dt == kernels.I32 {
						for s := range steps {
							got := kernels.FromBytes[int32](early[0][s])
							for i := range got {
								var want int32
								for r := range n {
									want += kernels.FromBytes[int32](floatInput(c.dt)(r, s))[i]
								}
								if got[i] != want {
									t.Fatalf("step %d [%d] = %d, want %d", s, i, got[i], want)
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestEarlyAllreduceMissed: when some rank is late to submit, the
// others' early data are dropped and the all-reduce fires from the cache
// once it comes, with the same results as without the early path.
func TestEarlyAllreduceMissed(t *testing.T) {
	const n, steps = 3, 12
	req := Request{Name: "metric", Kind: KindAllreduce, DType: kernels.F64, ReduceOp: kernels.Sum, Shape: []int{256}}
	late := func(rank, step int) time.Duration {
		if step%3 == 1 && rank == step%n {
			return 5 * time.Millisecond
		}
		return 0
	}
	early, st := earlyRun(t, meshtest.Mem, n, false, req, steps, floatInput(kernels.F64), late)
	plain, _ := earlyRun(t, meshtest.Mem, n, true, req, steps, floatInput(kernels.F64), nil)
	for r := range n {
		for s := range steps {
			if string(early[r][s]) != string(plain[r][s]) {
				t.Fatalf("rank %d step %d: the result differs from Comm.Allreduce's", r, s)
			}
		}
		t.Logf("rank %d: %d of %d steps early", r, st[r].Early, steps)
	}
}

// TestEarlyAllreduceBounded: an all-reduce whose data would take the
// control vector past Comm.InlineBytes never travels early (the exchange
// sends before it receives, as a small Allreduce does, and must fit what
// the transport buffers); it still completes, correctly, on its own.
func TestEarlyAllreduceBounded(t *testing.T) {
	const n, steps = 3, 5
	count := collective.DefaultInlineBytes / 4 // 32 KiB of float32: the vector would be larger
	req := Request{Name: "big", Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: []int{count}}
	input := func(rank, step int) []byte {
		v := make([]float32, count)
		for i := range v {
			v[i] = float32(rank + step)
		}
		return kernels.AsBytes(v)
	}
	out, st := earlyRun(t, meshtest.Mem, n, false, req, steps, input, nil)
	for r := range n {
		if st[r].Early != 0 {
			t.Fatalf("rank %d: %d steps early, want none", r, st[r].Early)
		}
		for s := range steps {
			if got, want := kernels.FromBytes[float32](out[r][s])[count-1], float32(n*s+n*(n-1)/2); got != want {
				t.Fatalf("rank %d step %d: %v, want %v", r, s, got, want)
			}
		}
	}
}

// TestEarlyAllreduceEmpty: a cached all-reduce of an empty tensor, the
// only operation of its cycles, is never carried early (it has no data to
// carry), and repeating it completes every step. The early path once took
// such an operation with no room for it in the control vector and indexed
// its flag at -1.
func TestEarlyAllreduceEmpty(t *testing.T) {
	const steps = 12
	req := Request{Name: "empty", Kind: KindAllreduce, DType: kernels.F32, ReduceOp: kernels.Sum, Shape: []int{0}}
	out, st := earlyRun(t, meshtest.Mem, 3, false, req, steps, func(int, int) []byte { return []byte{} }, nil)
	for r := range 3 {
		if len(out[r]) != steps || st[r].Early != 0 {
			t.Errorf("rank %d: %d of %d steps done, %d early; want all done, none early", r, len(out[r]), steps, st[r].Early)
		}
	}
}
