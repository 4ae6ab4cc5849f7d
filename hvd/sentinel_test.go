package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// situations are hvd's sentinels for what users branch on.
var situations = map[string]error{
	"ErrMismatch":        hvd.ErrMismatch,
	"ErrStall":           hvd.ErrStall,
	"ErrJoined":          hvd.ErrJoined,
	"ErrPeerGone":        hvd.ErrPeerGone,
	"ErrInvalidArgument": hvd.ErrInvalidArgument,
	"ErrShutdown":        hvd.ErrShutdown,
}

// matchesOnly checks that err matches every sentinel in want and no other
// of situations, and that its message contains every string in says.
func matchesOnly(err error, want []error, says ...string) error {
	if err == nil {
		return errors.New("no error")
	}
	for name, s := range situations {
		wanted := false
		for _, w := range want {
			wanted = wanted || w == s
		}
		if got := errors.Is(err, s); got != wanted {
			return fmt.Errorf("%v: errors.Is(err, hvd.%s) = %v, want %v", err, name, got, wanted)
		}
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			return fmt.Errorf("%v does not say %q", err, s)
		}
	}
	return nil
}

// TestSentinelMismatch: ranks that disagree on a slice's length, or on a
// tensor's dtype, fail with ErrMismatch (still engine.ErrMismatch), the
// message naming the tensor and the ranks as before.
func TestSentinelMismatch(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		err := hvd.AverageSlice(context.Background(), rt, "w", make([]float32, 3+r))
		want := fmt.Sprintf(`hvd: allreduce "w" on rank %d: engine: tensor "w": shape mismatch: rank 0 has [3], rank 1 has [4]`, r)
		if err := matchesOnly(err, []error{hvd.ErrMismatch}, want); err != nil {
			return err
		}
		if !errors.Is(err, engine.ErrMismatch) {
			return fmt.Errorf("%v no longer matches engine.ErrMismatch", err)
		}
		var x *hvd.Tensor
		if r == 0 {
			x = hvd.NewTensor("x", []float32{1})
		} else {
			x = hvd.NewTensor("x", []float64{1})
		}
		err = rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{})
		return matchesOnly(err, []error{hvd.ErrMismatch}, `tensor "x": dtype mismatch`)
	})
}

// TestSentinelStall: a stall ends with ErrStall whichever limit ends it:
// the stall shutdown time for tensors some ranks did not submit, or the
// op timeout, for those and for a rank that submits nothing at all.
func TestSentinelStall(t *testing.T) {
	for _, tc := range []struct {
		name        string
		op, stall   time.Duration
		silentRank1 bool
		says        string
	}{
		{"stall shutdown", time.Minute, time.Second, false, "a (submitted by rank 0)"},
		{"op timeout", time.Second, 0, false, "a (submitted by rank 0)"},
		{"silent rank", time.Second, 0, true, "no answer from rank 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rts := hvdtest.Start(t, 2, hvdtest.WithConfig(func(cfg *hvd.Config) {
				cfg.OpTimeout, cfg.StallShutdown = tc.op, tc.stall
			}))
			ranks := 2
			if tc.silentRank1 {
				ranks = 1
			}
			errs := make([]error, ranks)
			var wg sync.WaitGroup
			for r := range ranks {
				wg.Go(func() {
					errs[r] = hvd.AllreduceSlice(context.Background(), rts[r], []string{"a", "b"}[r], []float32{1}, kernels.Sum)
				})
			}
			wg.Wait()
			for r, err := range errs {
				if err := matchesOnly(err, []error{hvd.ErrStall}, fmt.Sprintf(`on rank %d`, r), tc.says); err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			if err := matchesOnly(rts[0].Err(), []error{hvd.ErrStall}); err != nil {
				t.Errorf("rank 0's Err: %v", err)
			}
		})
	}
}

// TestSentinelJoined: while rank 1 has joined, rank 0's broadcast and max
// all-reduce fail with ErrJoined naming the tensor and the joined rank;
// its average all-reduce still succeeds.
func TestSentinelJoined(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		if r == 1 {
			_, err := rt.Join(ctx)
			return err
		}
		err := joinedChecks(ctx, rt)
		if _, jerr := rt.Join(ctx); jerr != nil { // always, so that rank 1's Join returns
			return errors.Join(err, jerr)
		}
		return err
	})
}

// joinedChecks runs rank 0's part of TestSentinelJoined.
func joinedChecks(ctx context.Context, rt *hvd.Runtime) error {
	err := hvd.BroadcastSlice(ctx, rt, "b", []float32{1}, 0)
	if err := matchesOnly(err, []error{hvd.ErrJoined}, `tensor "b": broadcast while ranks [1] have joined`); err != nil {
		return err
	}
	err = hvd.AllreduceSlice(ctx, rt, "m", []float32{1}, kernels.Max)
	if err := matchesOnly(err, []error{hvd.ErrJoined}, `tensor "m"`); err != nil {
		return err
	}
	v := []float32{4}
	if err := hvd.AverageSlice(ctx, rt, "avg", v); err != nil || v[0] != 2 {
		return fmt.Errorf("average with a joined rank: %v, %v; want [2]", v, err)
	}
	return nil
}

// TestSentinelPeerGone: when rank 1's links close as if it died, rank 0's
// all-reduce fails with ErrPeerGone naming rank 1, and so does rank 0's
// Err.
func TestSentinelPeerGone(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	rts[1].Comm().Abort(errors.New("rank 1 crashed"))
	err := hvd.AllreduceSlice(context.Background(), rts[0], "x", make([]float32, 1000), kernels.Sum)
	if err := matchesOnly(err, []error{hvd.ErrPeerGone}, `hvd: allreduce "x" on rank 0`); err != nil {
		t.Error(err)
	}
	if err != nil && !strings.Contains(err.Error(), "rank 1 left") && !strings.Contains(err.Error(), "peer 1") {
		t.Errorf("%v does not name rank 1", err)
	}
	if !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("%v no longer matches collective.ErrPeerGone", err)
	}
	if err := matchesOnly(rts[0].Err(), []error{hvd.ErrPeerGone}); err != nil {
		t.Errorf("rank 0's Err: %v", err)
	}
}

// TestSentinelPeerShutdown: rank 1 shuts down while every rank has an
// operation in flight. The others' operations fail with ErrShutdown, as
// before, and ErrPeerGone, naming rank 1; rank 1's own operation fails
// with ErrShutdown alone.
func TestSentinelPeerShutdown(t *testing.T) {
	const n = 3
	rts := hvdtest.Start(t, n)
	own := rts[1].AllreduceAsync(hvd.NewTensor("y", make([]float32, 10)), kernels.Sum, hvd.ReduceOptions{})
	handles := map[int]*hvd.Handle{}
	for _, r := range []int{0, 2} {
		handles[r] = rts[r].AllreduceAsync(hvd.NewTensor("x", make([]float32, 10)), kernels.Sum, hvd.ReduceOptions{})
	}
	if err := rts[1].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := matchesOnly(own.Wait(context.Background()), []error{hvd.ErrShutdown}); err != nil {
		t.Errorf("rank 1's own operation: %v", err)
	}
	for r, h := range handles {
		err := h.Wait(context.Background())
		if err := matchesOnly(err, []error{hvd.ErrShutdown, hvd.ErrPeerGone}, "rank [1] shut down while tensors were in flight"); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestSentinelInvalidArgument: a nil tensor, a root out of range (on every
// rank), a nil pointer to BroadcastObject, and bad optimizer and sampler
// arguments fail with ErrInvalidArgument, the tensor errors with
// ErrInvalidTensor too, reading as before.
func TestSentinelInvalidArgument(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	ctx := context.Background()
	err := rts[0].Allreduce(ctx, nil, kernels.Sum, hvd.ReduceOptions{})
	if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, "hvd: invalid tensor: nil tensor"); err != nil {
		t.Error(err)
	}
	if !errors.Is(err, hvd.ErrInvalidTensor) {
		t.Errorf("%v does not match ErrInvalidTensor", err)
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		err := hvd.BroadcastSlice(ctx, rt, "w", []float32{1}, 5)
		if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, `tensor "w"`, "root 5"); err != nil {
			return err
		}
		if !errors.Is(err, hvd.ErrInvalidTensor) || !errors.Is(err, collective.ErrInvalid) {
			return fmt.Errorf("%v does not match ErrInvalidTensor and collective.ErrInvalid", err)
		}
		return nil
	})
	var nilPtr *int
	err = hvd.BroadcastObject(ctx, rts[0], nilPtr, 0)
	if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, "hvd: BroadcastObject needs a non-nil pointer, not *int"); err != nil {
		t.Error(err)
	}
	sgd, err := hvd.NewSGD(nil, hvd.SGDConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hvd.NewDistributedOptimizer(sgd, rts[0], hvd.DistributedOptions{BackwardPassesPerStep: -1})
	if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, "BackwardPassesPerStep -1"); err != nil {
		t.Error(err)
	}
	_, err = hvd.NewDistributedOptimizer(nil, rts[0], hvd.DistributedOptions{})
	if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, "needs an optimizer"); err != nil {
		t.Error(err)
	}
	if !errors.Is(err, hvd.ErrInvalidParam) {
		t.Errorf("%v does not match ErrInvalidParam", err)
	}
	_, err = hvd.NewElasticSampler(10, 0, 0, false)
	if err := matchesOnly(err, []error{hvd.ErrInvalidArgument}, "batch size > 0"); err != nil {
		t.Error(err)
	}
	if err := hvd.AverageSlice(ctx, nil, "x", []float32{1}); !errors.Is(err, hvd.ErrNotInitialized) {
		t.Errorf("AverageSlice on no runtime = %v, want ErrNotInitialized", err)
	}
}
