package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

func groupReq(name string, dt kernels.DType, group uint64, size int, shape ...int) engine.Request {
	r := allreduceReq(name, dt, kernels.Sum, shape...)
	r.Group, r.GroupSize = group, size
	return r
}

// TestEngineGroupedAllreduce: the members of a group wait for each other
// and complete as one unit, even across dtypes (two fused batches).
func TestEngineGroupedAllreduce(t *testing.T) {
	const n = 3
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		for step := range 2 {
			a, b, c := []float32{1, 2, 3}, []float64{float64(r), 1}, []float32{float32(r), 0, 0, 0, 1}
			ha := e.Submit(groupReq("g/a", kernels.F32, 42, 3, 3), kernels.AsBytes(a))
			hb := e.Submit(groupReq("g/b", kernels.F64, 42, 3, 2), kernels.AsBytes(b))
			time.Sleep(20 * time.Millisecond)
			for _, h := range []*engine.Handle{ha, hb} {
				select {
				case <-h.Done():
					return fmt.Errorf("step %d: %s finished before its group was complete: %v", step, h.Name(), h.Err())
				default:
				}
			}
			hc := e.Submit(groupReq("g/c", kernels.F32, 42, 3, 5), kernels.AsBytes(c))
			if err := hc.Wait(context.Background()); err != nil {
				return err
			}
			for _, h := range []*engine.Handle{ha, hb} {
				select {
				case <-h.Done():
				case <-time.After(time.Second):
					return fmt.Errorf("%s did not complete with its group", h.Name())
				}
			}
			if err := waitAll([]*engine.Handle{ha, hb}); err != nil {
				return err
			}
			if fmt.Sprint(a, b, c) != "[3 6 9] [3 3] [3 0 0 0 3]" {
				return fmt.Errorf("step %d: %v %v %v", step, a, b, c)
			}
		}
		return nil
	})
}

// TestEngineGroupFailsTogether: when one member of a group fails its
// negotiation, every member fails on every rank.
func TestEngineGroupFailsTogether(t *testing.T) {
	const n = 2
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		ha := e.Submit(groupReq("h/a", kernels.F32, 7, 2, 2), make([]byte, 8))
		hb := e.Submit(groupReq("h/b", kernels.F32, 7, 2, 1+r), make([]byte, 4*(1+r)))
		if err := hb.Wait(context.Background()); !errors.Is(err, engine.ErrMismatch) {
			return fmt.Errorf("h/b: %v", err)
		}
		if err := ha.Wait(context.Background()); !errors.Is(err, engine.ErrMismatch) {
			return fmt.Errorf("h/a: %v", err)
		}
		return nil
	})
}

// TestEngineGroupedAllgatherReducescatter: all-gathers and reduce-scatters
// group too: a member waits for the rest of its group (here a
// reduce-scatter submitted last), then every member completes with its
// result.
func TestEngineGroupedAllgatherReducescatter(t *testing.T) {
	const n = 3
	es, _ := newEngines(t, meshtest.Mem, n, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		gather := func(name string, rows int) engine.Request {
			return engine.Request{Name: name, Kind: engine.KindAllgather, DType: kernels.I32, Shape: []int{rows}, Group: 11, GroupSize: 3}
		}
		mine := make([]int32, r+1) // rank r contributes r+1 copies of r
		for i := range mine {
			mine[i] = int32(r)
		}
		ha := e.Submit(gather("ag/a", r+1), kernels.AsBytes(mine))
		hb := e.Submit(gather("ag/b", 1), kernels.AsBytes([]int32{int32(10 * r)}))
		time.Sleep(20 * time.Millisecond)
		for _, h := range []*engine.Handle{ha, hb} {
			select {
			case <-h.Done():
				return fmt.Errorf("%s finished before its group was complete: %v", h.Name(), h.Err())
			default:
			}
		}
		rs := engine.Request{Name: "ag/c", Kind: engine.KindReducescatter, DType: kernels.I32, ReduceOp: kernels.Sum, Shape: []int{3}, Group: 11, GroupSize: 3}
		hc := e.Submit(rs, kernels.AsBytes([]int32{1, 2, 3}))
		if err := waitAll([]*engine.Handle{hc, ha, hb}); err != nil {
			return err
		}
		outs := make([]string, 3)
		for i, h := range []*engine.Handle{ha, hb, hc} {
			data, _ := h.Output()
			outs[i] = fmt.Sprint(kernels.FromBytes[int32](data))
		}
		want := []string{"[0 1 1 2 2 2]", "[0 10 20]", fmt.Sprint([]int32{int32(3 * (r + 1))})}
		if fmt.Sprint(outs) != fmt.Sprint(want) {
			return fmt.Errorf("outputs %v, want %v", outs, want)
		}
		return nil
	})
}

// TestEngineGroupOfBroadcastsRejected: broadcasts do not group; every
// rank's request fails its check.
func TestEngineGroupOfBroadcastsRejected(t *testing.T) {
	es, _ := newEngines(t, meshtest.Mem, 2, testConfig())
	onEngines(t, es, func(r int, e *engine.Engine) error {
		req := engine.Request{Name: "bc", Kind: engine.KindBroadcast, DType: kernels.F32, Shape: []int{1}, Group: 5, GroupSize: 1}
		err := e.Submit(req, make([]byte, 4)).Wait(context.Background())
		if err == nil || !strings.Contains(err.Error(), "group") {
			return fmt.Errorf("a grouped broadcast: %v", err)
		}
		return nil
	})
}
