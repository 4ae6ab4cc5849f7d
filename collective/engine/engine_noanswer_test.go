package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestEngineRankFrozenMidOperation: as TestEngineFrozenRankTimesOut, but
// the rank freezes wherever its engine is, often in the middle of a
// negotiation exchange. Every other rank must still fail within 5 s with a
// *NoAnswerError; a rank that another rank's wait held up past its own
// deadline may be named beside the frozen one (it did not answer in time
// either), and some rank must name the frozen one.
func TestEngineRankFrozenMidOperation(t *testing.T) {
	const opTimeout, bound = 300 * time.Millisecond, 5 * time.Second
	for _, c := range []struct {
		name      string
		mk        meshtest.Func
		n, frozen int
	}{
		{"mem/4", meshtest.Mem, 4, 2},
		{"mem/6", meshtest.Mem, 6, 1},
		{"tcp/4", meshtest.TCP, 4, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := runFrozen(t, c.mk, c.n, c.frozen, opTimeout, 2*bound, (*freezable).freeze)
			named := false
			for r, err := range run.errs {
				if r == c.frozen {
					continue
				}
				var na *engine.NoAnswerError
				if !errors.As(err, &na) || na.Rank != r || na.Op != "negotiation" || len(na.Silent)+len(na.Gone) == 0 {
					t.Fatalf("rank %d: %v; want a *NoAnswerError", r, err)
				}
				if d := run.failed[r].Sub(run.frozenAt); d < 0 || d > bound {
					t.Fatalf("rank %d failed %v after rank %d froze, want within [0, %v]: %v", r, d, c.frozen, bound, err)
				}
				named = named || slices.Contains(na.Silent, c.frozen)
				t.Logf("rank %d after %v: %v", r, run.failed[r].Sub(run.frozenAt).Round(time.Millisecond), err)
			}
			if !named {
				t.Fatalf("no rank names rank %d: %v", c.frozen, run.errs)
			}
		})
	}
}

// TestEngineNoAnswerError: rank 1 submits nothing, so its engine does not
// negotiate. Rank 0's operation fails after OpTimeout with a
// *NoAnswerError that names rank 1, the limit and the tensor pending here;
// the Comm has failed with it, and rank 1's next operation fails naming
// rank 0, which left.
func TestEngineNoAnswerError(t *testing.T) {
	cfg := testConfig()
	cfg.OpTimeout = 200 * time.Millisecond
	es, cs := newEngines(t, meshtest.Mem, 2, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := es[0].Submit(allreduceReq("x", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx)
	var na *engine.NoAnswerError
	if !errors.As(err, &na) || na.Rank != 0 || !slices.Equal(na.Silent, []int{1}) || na.Gone != nil ||
		na.Limit != cfg.OpTimeout || !slices.Equal(na.Pending, []string{"x"}) || na.More != 0 || na.Err != collective.ErrTimeout {
		t.Fatalf("rank 0: %#v", err)
	}
	if !errors.Is(cs[0].Err(), collective.ErrTimeout) {
		t.Fatalf("rank 0's Comm: %v", cs[0].Err())
	}
	err = es[1].Submit(allreduceReq("x", kernels.F32, kernels.Sum, 1), make([]byte, 4)).Wait(ctx)
	if !errors.As(err, &na) || na.Rank != 1 || na.Silent != nil || !slices.Equal(na.Gone, []int{0}) || !errors.Is(err, collective.ErrPeerGone) {
		t.Fatalf("rank 1: %v", err)
	}
}
