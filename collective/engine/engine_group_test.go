package engine_test

import (
	"context"
	"errors"
	"fmt"
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
