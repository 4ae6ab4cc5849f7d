package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestEngineJoin: rank 2 runs out of data and joins; ranks 0 and 1 go on
// with sums and averages (rank 2 contributes zeros, the average divides
// by 3), a broadcast with a joined rank fails on every rank that
// submitted it, and once all have joined every Join returns the last
// rank. Afterwards the job continues normally.
func TestEngineJoin(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			const n = 3
			es, _ := newEngines(t, tr.Make, n, testConfig())
			joined := make(chan struct{})
			onEngines(t, es, func(r int, e *engine.Engine) error {
				if r == 2 {
					return joinEarly(e, joined)
				}
				<-joined
				return keepTraining(r, e)
			})
			onEngines(t, es, func(r int, e *engine.Engine) error {
				x := []int32{int32(r)}
				if err := e.Submit(allreduceReq("after", kernels.I32, kernels.Sum, 1), kernels.AsBytes(x)).Wait(context.Background()); err != nil {
					return err
				}
				if x[0] != 3 {
					return fmt.Errorf("after the join: sum %v", x)
				}
				return nil
			})
		})
	}
}

func joinEarly(e *engine.Engine, joined chan<- struct{}) error {
	refused := make(chan error, 1)
	go func() { // let the Join reach the loop before the others start
		time.Sleep(10 * time.Millisecond)
		refused <- e.Submit(allreduceReq("late", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Err()
		close(joined)
	}()
	last, err := e.Join(context.Background())
	if err != nil {
		return err
	}
	if err := <-refused; !errors.Is(err, engine.ErrJoined) {
		return fmt.Errorf("submit while joined: %v", err)
	}
	if last != 0 {
		return fmt.Errorf("Join returned last rank %d, want 0", last)
	}
	return nil
}

func keepTraining(r int, e *engine.Engine) error {
	for step := range 3 {
		sum := []float32{float32(r + 1), 10}
		avg := []float64{float64(3 * (r + 1))}
		hs := []*engine.Handle{
			e.Submit(allreduceReq(fmt.Sprint("sum", step), kernels.F32, kernels.Sum, 2), kernels.AsBytes(sum)),
			e.Submit(allreduceReq(fmt.Sprint("avg", step), kernels.F64, kernels.Average, 1), kernels.AsBytes(avg)),
		}
		if err := waitAll(hs); err != nil {
			return err
		}
		if fmt.Sprint(sum, avg) != "[3 20] [3]" {
			return fmt.Errorf("step %d with rank 2 joined: sum %v, average %v", step, sum, avg)
		}
	}
	err := e.Submit(engine.Request{Name: "bc", Kind: engine.KindBroadcast, DType: kernels.F32, Shape: []int{1}}, make([]byte, 4)).Wait(context.Background())
	if !errors.Is(err, engine.ErrJoined) || !strings.Contains(err.Error(), `"bc": broadcast while ranks [2] have joined`) {
		return fmt.Errorf("broadcast with a joined rank: %v", err)
	}
	err = e.Submit(allreduceReq("mx", kernels.F32, kernels.Max, 1), make([]byte, 4)).Wait(context.Background())
	if !errors.Is(err, engine.ErrJoined) {
		return fmt.Errorf("max all-reduce with a joined rank: %v", err)
	}
	if r == 0 {
		time.Sleep(20 * time.Millisecond) // rank 0 joins last
	}
	last, err := e.Join(context.Background())
	if err != nil {
		return err
	}
	if last != 0 {
		return fmt.Errorf("Join returned last rank %d, want 0", last)
	}
	return nil
}

// TestEngineJoinWithCachedAndFused: a joined rank takes part in cached
// and fused all-reduces it never submitted.
func TestEngineJoinWithCachedAndFused(t *testing.T) {
	const n = 2
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	// step all-reduces g0..g7, rank r giving [r+1, i] for g<i>, and
	// records in wrongSum[r] a result other than the sum over the ranks
	// that submitted (a joined rank gives zeros); it goes on, so that rank
	// 0 still joins and rank 1's Join returns.
	wrongSum := make([]error, n)
	step := func(r int, e *engine.Engine, submitters int) error {
		hs := make([]*engine.Handle, 8)
		bufs := make([][]float32, 8)
		for i := range hs {
			bufs[i] = []float32{float32(r + 1), float32(i)}
			hs[i] = e.Submit(allreduceReq(fmt.Sprint("g", i), kernels.F32, kernels.Sum, 2), kernels.AsBytes(bufs[i]))
		}
		if err := waitAll(hs); err != nil {
			return err
		}
		for i, b := range bufs {
			if want := []float32{float32(submitters * (submitters + 1) / 2), float32(submitters * i)}; !slices.Equal(b, want) && wrongSum[r] == nil {
				wrongSum[r] = fmt.Errorf("rank %d with %d ranks submitting: g%d = %v, want %v", r, submitters, i, b, want)
			}
		}
		return nil
	}
	onEngines(t, es, func(r int, e *engine.Engine) error { return step(r, e, n) }) // fills the cache
	onEngines(t, es, func(r int, e *engine.Engine) error {
		if r == 1 {
			_, err := e.Join(context.Background())
			return err
		}
		for range 3 {
			if err := step(r, e, 1); err != nil {
				return err
			}
		}
		_, err := e.Join(context.Background())
		return err
	})
	if err := errors.Join(wrongSum...); err != nil {
		t.Fatal(err)
	}
	if st := es[1].Stats(); st.Cached < 3*8 {
		t.Fatalf("joined rank did not take the cached path: %+v", st)
	}
}

// TestEngineJoinSingleRank: a job of one rank joins at once.
func TestEngineJoinSingleRank(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 1, testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if last, err := es[0].Join(ctx); err != nil || last != 0 {
		t.Fatalf("%d %v", last, err)
	}
}
