package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// newEngines starts one engine per rank over mk's transports; cleanup shuts
// them down and closes the communicators.
func newEngines(t *testing.T, mk meshtest.Func, n int, cfg engine.Config) ([]*engine.Engine, []*collective.Comm) {
	t.Helper()
	cs := meshtest.Comms(t, mk, n, collective.Options{})
	es := make([]*engine.Engine, n)
	for r, c := range cs {
		es[r] = engine.New(c, cfg)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, e := range es {
			wg.Go(e.Shutdown)
		}
		wg.Wait()
	})
	return es, cs
}

// testConfig is the default configuration with a short cycle.
func testConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.CycleTime = 200 * time.Microsecond
	return cfg
}

// onEngines runs f on every rank at once and fails on any error or when
// the ranks take longer than 20 s.
func onEngines(t *testing.T, es []*engine.Engine, f func(rank int, e *engine.Engine) error) {
	t.Helper()
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	for r, e := range es {
		wg.Go(func() { errs[r] = f(r, e) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("ranks did not finish within 20s")
	}
	meshtest.MustAll(t, errs)
}

func allreduceReq(name string, dt kernels.DType, op kernels.Op, shape ...int) engine.Request {
	return engine.Request{Name: name, Kind: engine.KindAllreduce, DType: dt, ReduceOp: op, Shape: shape}
}

// waitAll waits for every handle and returns the first error.
func waitAll(hs []*engine.Handle) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var first error
	for _, h := range hs {
		if err := h.Wait(ctx); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", h.Name(), err)
		}
	}
	return first
}

// TestEngineShuffledOrders: every rank submits the same named all-reduces
// in its own random order, several steps in a row (the later ones from
// the response cache), with and without fusion and the cache.
func TestEngineShuffledOrders(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, c := range []struct {
			name          string
			fusion, cache int
		}{{"fused-cached", 64 << 20, 1024}, {"unfused-uncached", 0, 0}, {"small-fusion-tiny-cache", 300, 5}} {
			t.Run(tr.Name+"/"+c.name, func(t *testing.T) {
				cfg := testConfig()
				cfg.FusionThreshold, cfg.CacheCapacity = int64(c.fusion), c.cache
				es, _ := newEngines(t, tr.Make, 4, cfg)
				onEngines(t, es, func(r int, e *engine.Engine) error { return shuffledSteps(r, e, 4, 40) })
				st := es[0].Stats()
				t.Logf("rank 0: %+v", st)
				// A steady-state operation comes from the cache, or, when it
				// was a cycle's only one, completes early in the next
				// cycle's exchange (Stats.Early), which a loaded machine
				// makes more likely: both skip the full negotiation.
				if c.cache >= 40 && st.Cached+st.Early < 3*40 {
					t.Errorf("steady-state steps did not come from the cache: %+v", st)
				}
				if c.fusion > 1<<20 && st.Batches >= st.Tensors {
					t.Errorf("nothing was fused: %+v", st)
				}
			})
		}
	}
}

// shuffledSteps runs steps of n all-reduces (float32 sums and float64
// averages of different lengths) submitted in a random order per rank.
func shuffledSteps(rank int, e *engine.Engine, steps, n int) error {
	rng := rand.New(rand.NewPCG(uint64(rank), 7))
	const size = 4
	for step := range steps {
		hs := make([]*engine.Handle, n)
		f32 := make([][]float32, n)
		f64 := make([][]float64, n)
		for _, i := range rng.Perm(n) {
			name := fmt.Sprintf("t%d", i)
			if i%2 == 0 {
				f32[i] = make([]float32, 1+i*3)
				for j := range f32[i] {
					f32[i][j] = float32(rank + j + step)
				}
				hs[i] = e.Submit(allreduceReq(name, kernels.F32, kernels.Sum, len(f32[i])), kernels.AsBytes(f32[i]))
			} else {
				f64[i] = make([]float64, 2*i)
				for j := range f64[i] {
					f64[i][j] = float64(rank * j)
				}
				hs[i] = e.Submit(allreduceReq(name, kernels.F64, kernels.Average, i, 2), kernels.AsBytes(f64[i]))
			}
		}
		if err := waitAll(hs); err != nil {
			return err
		}
		for i := range n {
			for j := range f32[i] {
				if want := float32(size*(j+step) + 6); f32[i][j] != want {
					return fmt.Errorf("step %d t%d[%d] = %v, want %v", step, i, j, f32[i][j], want)
				}
			}
			for j := range f64[i] {
				if want := 6 * float64(j) / size; f64[i][j] != want {
					return fmt.Errorf("step %d t%d[%d] = %v, want %v", step, i, j, f64[i][j], want)
				}
			}
		}
	}
	return nil
}

// TestEngineOtherKinds: all-gather (ranks give different rows), broadcast,
// all-to-all, reduce-scatter and a barrier, submitted in shuffled orders.
func TestEngineOtherKinds(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			const n = 3
			es, _ := newEngines(t, tr.Make, n, testConfig())
			onEngines(t, es, func(r int, e *engine.Engine) error {
				for step := range 3 {
					if err := otherKinds(r, e, step); err != nil {
						return fmt.Errorf("step %d: %w", step, err)
					}
				}
				return nil
			})
		})
	}
}

func otherKinds(r int, e *engine.Engine, step int) error {
	rows := make([]float64, 2*(r+1))
	for i := range rows {
		rows[i] = float64(r)
	}
	bc := []int64{int64(r * 10), int64(r*10 + 1)}
	a2a := make([]uint8, 6)
	for i := range a2a {
		a2a[i] = uint8(r)
	}
	rs := []int32{1, 2, 3, 4, 5, 6, 7}
	subs := []func() *engine.Handle{
		func() *engine.Handle {
			return e.Submit(engine.Request{Name: "rows", Kind: engine.KindAllgather, DType: kernels.F64, Shape: []int{r + 1, 2}}, kernels.AsBytes(rows))
		},
		func() *engine.Handle {
			return e.Submit(engine.Request{Name: "w", Kind: engine.KindBroadcast, DType: kernels.I64, Shape: []int{2}, Root: 2}, kernels.AsBytes(bc))
		},
		func() *engine.Handle {
			return e.Submit(engine.Request{Name: "a2a", Kind: engine.KindAlltoall, DType: kernels.U8, Shape: []int{6}, Splits: []int{1, 2, 3}}, kernels.AsBytes(a2a))
		},
		func() *engine.Handle {
			return e.Submit(engine.Request{Name: "rs", Kind: engine.KindReducescatter, DType: kernels.I32, Shape: []int{7}, ReduceOp: kernels.Sum}, kernels.AsBytes(rs))
		},
		func() *engine.Handle {
			return e.Submit(engine.Request{Name: "barrier", Kind: engine.KindBarrier}, nil)
		},
	}
	hs := make([]*engine.Handle, len(subs))
	for _, i := range rand.New(rand.NewPCG(uint64(r), uint64(step))).Perm(len(subs)) {
		hs[i] = subs[i]()
	}
	if err := waitAll(hs); err != nil {
		return err
	}
	out, shape := hs[0].Output()
	if got := kernels.FromBytes[float64](out); fmt.Sprint(got, shape) != "[0 0 1 1 1 1 2 2 2 2 2 2] [6 2]" {
		return fmt.Errorf("allgather = %v %v", got, shape)
	}
	if fmt.Sprint(bc) != "[20 21]" {
		return fmt.Errorf("broadcast = %v", bc)
	}
	// splits [1 2 3]: every rank sends r+1 elements (its rank) to rank r.
	out, shape = hs[2].Output()
	var wantA2A []uint8
	for p := range 3 {
		for range r + 1 {
			wantA2A = append(wantA2A, uint8(p))
		}
	}
	if v := kernels.FromBytes[uint8](out); !slices.Equal(v, wantA2A) || !slices.Equal(shape, []int{3 * (r + 1)}) {
		return fmt.Errorf("alltoall = %v %v, want %v [%d]", v, shape, wantA2A, 3*(r+1))
	}
	out, shape = hs[3].Output()
	want := [][]int32{{3, 6, 9}, {12, 15}, {18, 21}}[r]
	if got := kernels.FromBytes[int32](out); fmt.Sprint(got) != fmt.Sprint(want) || shape[0] != len(want) {
		return fmt.Errorf("reducescatter = %v %v, want %v", got, shape, want)
	}
	if fmt.Sprint(rs) != "[1 2 3 4 5 6 7]" {
		return fmt.Errorf("reducescatter changed its input: %v", rs)
	}
	return nil
}

// TestEngineMismatch: ranks that disagree on a tensor get the same error
// on every rank, naming the tensor and both values; the engine goes on.
func TestEngineMismatch(t *testing.T) {
	const n = 3
	cases := []struct {
		name string
		req  func(r int) engine.Request
		want string
	}{
		{"shape", func(r int) engine.Request {
			if r == 2 {
				return allreduceReq("w1", kernels.F32, kernels.Sum, 4, 3)
			}
			return allreduceReq("w1", kernels.F32, kernels.Sum, 3, 4)
		}, `engine: tensor "w1": shape mismatch: rank 0 has [3 4], rank 2 has [4 3]`},
		{"dtype", func(r int) engine.Request {
			return allreduceReq("w2", []kernels.DType{kernels.F32, kernels.I32, kernels.F32}[r], kernels.Sum, 3)
		}, `engine: tensor "w2": dtype mismatch: rank 0 has float32, rank 1 has int32`},
		{"op", func(r int) engine.Request {
			return allreduceReq("w3", kernels.F32, []kernels.Op{kernels.Sum, kernels.Sum, kernels.Max}[r], 2)
		}, `engine: tensor "w3": reduce op mismatch: rank 0 has sum, rank 2 has max`},
		{"kind", func(r int) engine.Request {
			req := allreduceReq("w4", kernels.F32, kernels.Sum, 2)
			if r == 1 {
				req.Kind = engine.KindBroadcast
			}
			return req
		}, `engine: tensor "w4": operation mismatch: rank 0 has allreduce, rank 1 has broadcast`},
		{"root", func(r int) engine.Request {
			return engine.Request{Name: "w5", Kind: engine.KindBroadcast, DType: kernels.F32, Shape: []int{2}, Root: min(r, 1)}
		}, `engine: tensor "w5": root mismatch: rank 0 has 0, rank 1 has 1`},
		{"allgather", func(r int) engine.Request {
			return engine.Request{Name: "w6", Kind: engine.KindAllgather, DType: kernels.F32, Shape: []int{r + 1, 2 + r/2}}
		}, `engine: tensor "w6": shape mismatch: rank 0 has [1 2], rank 2 has [3 3]`},
		{"invalid", func(r int) engine.Request {
			return engine.Request{Name: "w7", Kind: engine.KindBroadcast, DType: kernels.F32, Shape: []int{2}, Root: 5}
		}, `engine: tensor "w7": rank 0: collective: invalid argument: root 5 outside [0, 3)`},
	}
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		for _, c := range cases {
			req := c.req(r)
			err := e.Submit(req, make([]byte, req.Bytes())).Wait(context.Background())
			if err == nil || err.Error() != c.want {
				return fmt.Errorf("%s: got %v, want %s", c.name, err, c.want)
			}
			if c.name != "invalid" && !errors.Is(err, engine.ErrMismatch) {
				return fmt.Errorf("%s: %v does not wrap ErrMismatch", c.name, err)
			}
		}
		x := []float32{1}
		return e.Submit(allreduceReq("after", kernels.F32, kernels.Sum, 1), kernels.AsBytes(x)).Wait(context.Background())
	})
}

// TestEngineDuplicateAndShutdown: a name in flight cannot be submitted
// again; after Shutdown every call fails with ErrShutdown, and the other
// ranks' pending operations fail naming the rank that left.
func TestEngineDuplicateAndShutdown(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 2, testConfig())
	x := []float32{1}
	h1 := es[0].Submit(allreduceReq("x", kernels.F32, kernels.Sum, 1), kernels.AsBytes(x))
	h2 := es[0].Submit(allreduceReq("x", kernels.F32, kernels.Sum, 1), kernels.AsBytes([]float32{2}))
	if err := h2.Wait(context.Background()); !errors.Is(err, engine.ErrDuplicateName) {
		t.Fatalf("duplicate: %v", err)
	}
	y := []float32{5}
	if err := es[1].Submit(allreduceReq("x", kernels.F32, kernels.Sum, 1), kernels.AsBytes(y)).Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h1.Wait(context.Background()); err != nil || x[0] != 6 {
		t.Fatalf("%v %v", err, x)
	}
	// Both ranks negotiate (each waits for a name the other never sends)
	// when rank 1 shuts down: rank 0 learns it in the next cycle.
	hz := es[0].Submit(allreduceReq("z", kernels.F32, kernels.Sum, 1), kernels.AsBytes(x))
	hq := es[1].Submit(allreduceReq("q", kernels.F32, kernels.Sum, 1), kernels.AsBytes(y))
	time.Sleep(20 * time.Millisecond)
	es[1].Shutdown()
	if err := hq.Wait(context.Background()); !errors.Is(err, engine.ErrShutdown) {
		t.Fatalf("rank 1's own pending operation: %v", err)
	}
	err := hz.Wait(context.Background())
	if !errors.Is(err, engine.ErrShutdown) || !strings.Contains(err.Error(), "rank [1] shut down") {
		t.Fatalf("rank 0's pending operation: %v", err)
	}
	for r, e := range es {
		if err := e.Submit(allreduceReq("later", kernels.F32, kernels.Sum, 1), kernels.AsBytes(x)).Wait(context.Background()); !errors.Is(err, engine.ErrShutdown) {
			t.Fatalf("rank %d: submit after shutdown: %v", r, err)
		}
		if _, err := e.Join(context.Background()); !errors.Is(err, engine.ErrShutdown) {
			t.Fatalf("rank %d: join after shutdown: %v", r, err)
		}
	}
}

// TestEngineLargeNotFused: all-reduces of soloBytes (1 MiB) or more that
// are ready together are reduced one by one, in place, while small ones
// are fused.
func TestEngineLargeNotFused(t *testing.T) {
	for _, count := range []int{2, 1 << 18} { // 8 bytes and 1 MiB of float32
		cfg := testConfig()
		cfg.CycleTime = 50 * time.Millisecond // every submission lands in the first cycle
		es, _ := newEngines(t, meshtest.Mem, 2, cfg)
		const n = 8
		// rank r gives r+i+j%7 at element j of tensor s<i>.
		bufs := make([][][]float32, 2)
		onEngines(t, es, func(r int, e *engine.Engine) error {
			hs := make([]*engine.Handle, n)
			bufs[r] = make([][]float32, n)
			for i := range n {
				bufs[r][i] = make([]float32, count)
				for j := range count {
					bufs[r][i][j] = float32(r + i + j%7)
				}
				hs[i] = e.Submit(allreduceReq(fmt.Sprintf("s%d", i), kernels.F32, kernels.Sum, count), kernels.AsBytes(bufs[r][i]))
			}
			return waitAll(hs)
		})
		for r := range bufs {
			for i := range n {
				for j, got := range bufs[r][i] {
					if want := float32(1 + 2*(i+j%7)); got != want {
						t.Fatalf("count %d: rank %d s%d[%d] = %v, want %v", count, r, i, j, got, want)
					}
				}
			}
		}
		st := es[0].Stats()
		if large := count*4 >= 1<<20; large && st.Batches != n || !large && st.Batches >= n {
			t.Errorf("count %d: %d tensors in %d batches", count, st.Tensors, st.Batches)
		}
	}
}
