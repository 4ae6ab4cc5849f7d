package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
)

// nilRuntimeHelper calls one helper that takes a *Runtime with nil.
type nilRuntimeHelper struct {
	name string
	call func(ctx context.Context, t *testing.T) error
}

// nilRuntimeHelpers lists every helper that takes a *Runtime, each called
// with nil; after Init each one's effect is checked as well.
func nilRuntimeHelpers() []nilRuntimeHelper {
	newSGD := func(t *testing.T, v float64) *hvd.SGD {
		p := hvd.NewParam("w", 2)
		p.Value[0], p.Value[1] = v, v
		sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 0.5, Momentum: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		return sgd
	}
	return []nilRuntimeHelper{
		{"BroadcastParameters", func(ctx context.Context, t *testing.T) error {
			p := hvd.NewParam("w", 2)
			p.Value[0] = 3
			if err := hvd.BroadcastParameters(ctx, nil, []*hvd.Param{p}, 0); err != nil {
				return err
			}
			if p.Value[0] != 3 {
				return fmt.Errorf("value %v after a one-rank broadcast, want 3", p.Value[0])
			}
			return nil
		}},
		{"BroadcastOptimizerState", func(ctx context.Context, t *testing.T) error {
			sgd := newSGD(t, 1)
			sgd.SetLR(0.25)
			if err := hvd.BroadcastOptimizerState(ctx, nil, sgd, 0); err != nil {
				return err
			}
			if sgd.LR() != 0.25 {
				return fmt.Errorf("lr %v after a one-rank broadcast, want 0.25", sgd.LR())
			}
			return nil
		}},
		{"BroadcastObject", func(ctx context.Context, t *testing.T) error {
			v := map[string]int{"epoch": 7}
			if err := hvd.BroadcastObject(ctx, nil, &v, 0); err != nil {
				return err
			}
			if v["epoch"] != 7 {
				return fmt.Errorf("object %v after a one-rank broadcast", v)
			}
			return nil
		}},
		{"AllgatherObject", func(ctx context.Context, t *testing.T) error {
			got, err := hvd.AllgatherObject(ctx, nil, map[string]int{"epoch": 7})
			if err == nil && (len(got) != 1 || got[0]["epoch"] != 7) {
				return fmt.Errorf("objects %v after a one-rank all-gather", got)
			}
			return err
		}},
		{"AverageMetric", func(ctx context.Context, t *testing.T) error {
			got, err := hvd.AverageMetric(ctx, nil, "loss", 1.5)
			if err == nil && got != 1.5 {
				return fmt.Errorf("average %v of one rank's 1.5", got)
			}
			return err
		}},
		{"AverageMetrics", func(ctx context.Context, t *testing.T) error {
			got, err := hvd.AverageMetrics(ctx, nil, map[string]float64{"loss": 1.5, "acc": 0.5})
			if err == nil && (got["loss"] != 1.5 || got["acc"] != 0.5) {
				return fmt.Errorf("averages %v of one rank", got)
			}
			return err
		}},
		{"DistributedOptimizer", func(ctx context.Context, t *testing.T) error {
			sgd := newSGD(t, 1)
			opt, err := hvd.NewDistributedOptimizer(sgd, nil, hvd.DistributedOptions{})
			if err != nil {
				return err
			}
			sgd.Params()[0].Grad[0] = 2
			if err := opt.Step(ctx); err != nil {
				return err
			}
			if w := sgd.Params()[0].Value[0]; w != 0 { // 1 - 0.5·2
				return fmt.Errorf("w = %v after one step, want 0", w)
			}
			return nil
		}},
		{"Checkpointer.Save", func(ctx context.Context, t *testing.T) error {
			c := hvd.Checkpointer{Dir: t.TempDir()}
			if err := c.Save(nil, hvd.NewCheckpoint(newSGD(t, 1), 0, 5)); err != nil {
				return err
			}
			if ck, _, err := c.Latest(); err != nil || ck == nil || ck.Step != 5 {
				return fmt.Errorf("latest after Save: %v, %v", ck, err)
			}
			return nil
		}},
		{"Checkpointer.LoadLatest", func(ctx context.Context, t *testing.T) error {
			dir := t.TempDir()
			if err := hvd.WriteCheckpoint((&hvd.Checkpointer{Dir: dir}).Path(3), hvd.NewCheckpoint(newSGD(t, 1), 1, 3)); err != nil {
				t.Fatal(err)
			}
			c := hvd.Checkpointer{Dir: dir}
			ck, err := c.LoadLatest(ctx, nil)
			if err == nil && (ck == nil || ck.Step != 3) {
				return fmt.Errorf("LoadLatest = %v, want step 3", ck)
			}
			return err
		}},
	}
}

// callNoPanic runs h, turning a panic into an error.
func callNoPanic(ctx context.Context, t *testing.T, h nilRuntimeHelper) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return h.call(ctx, t)
}

// TestNilRuntimeMeansDefault: every helper that takes a *Runtime reads nil
// as the default runtime — ErrNotInitialized before Init (never a panic),
// and the one-rank job after a default Init.
func TestNilRuntimeMeansDefault(t *testing.T) {
	ctx := context.Background()
	if err := hvd.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, h := range nilRuntimeHelpers() {
		if err := callNoPanic(ctx, t, h); !errors.Is(err, hvd.ErrNotInitialized) {
			t.Errorf("%s(nil) before Init: %v, want ErrNotInitialized", h.name, err)
		}
	}

	t.Setenv(jobenv.EnvRank, "")
	if err := hvd.Init(ctx); err != nil {
		t.Fatal(err)
	}
	defer hvd.Shutdown()
	for _, h := range nilRuntimeHelpers() {
		if err := callNoPanic(ctx, t, h); err != nil {
			t.Errorf("%s(nil) after a one-rank Init: %v", h.name, err)
		}
	}
}

// TestHelpersRejectNilOptimizer: a nil optimizer is an error, not a panic.
func TestHelpersRejectNilOptimizer(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	if err := hvd.BroadcastOptimizerState(context.Background(), rt, nil, 0); !errors.Is(err, hvd.ErrOptimizerState) {
		t.Errorf("BroadcastOptimizerState(nil optimizer): %v", err)
	}
	if _, err := hvd.NewDistributedOptimizer(nil, rt, hvd.DistributedOptions{}); !errors.Is(err, hvd.ErrInvalidParam) {
		t.Errorf("NewDistributedOptimizer(nil optimizer): %v", err)
	}
}
