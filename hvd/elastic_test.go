package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// progress is a caller's field of an elastic state.
type progress struct {
	Epoch, Batch int
	Loss         float64
	Seen         []int
}

// elasticModel is a float64 and a float32 parameter under SGD with
// momentum, wrapped in a DistributedOptimizer on rt, with values and
// gradients that depend on rank.
func elasticModel(t *testing.T, rt *hvd.Runtime, rank int) (*hvd.DistributedOptimizer, []*hvd.Param) {
	t.Helper()
	a, b := hvd.NewParam("a", 5), hvd.NewParam32("b", 3)
	for i := range a.Value {
		a.Value[i] = float64(rank*10 + i)
	}
	for i := range b.Value32 {
		b.Value32[i] = float32(rank*10 + i)
	}
	sgd, err := hvd.NewSGD([]*hvd.Param{a, b}, hvd.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return opt, []*hvd.Param{a, b}
}

// trainStep gives every gradient a value and updates.
func trainStep(ctx context.Context, opt hvd.Optimizer, ps []*hvd.Param, g float64) error {
	for _, p := range ps {
		for i := range p.Grad {
			p.Grad[i] = g + float64(i)
		}
		for i := range p.Grad32 {
			p.Grad32[i] = float32(g) - float32(i)
		}
	}
	return opt.Step(ctx)
}

// snapshotOf is what the test compares: values, optimizer state, progress.
type snapshotOf struct {
	a   []float64
	b   []float32
	st  hvd.OptimizerState
	pro progress
}

func snap(opt hvd.Optimizer, ps []*hvd.Param, pro *progress) snapshotOf {
	return snapshotOf{slices.Clone(ps[0].Value), slices.Clone(ps[1].Value32), opt.State(),
		progress{pro.Epoch, pro.Batch, pro.Loss, slices.Clone(pro.Seen)}}
}

func (s snapshotOf) diff(o snapshotOf) string {
	switch {
	case !slices.Equal(s.a, o.a):
		return fmt.Sprintf("float64 values %v, want %v", s.a, o.a)
	case !slices.Equal(s.b, o.b):
		return fmt.Sprintf("float32 values %v, want %v", s.b, o.b)
	case s.st.Steps != o.st.Steps || s.st.LR != o.st.LR:
		return fmt.Sprintf("optimizer steps %d lr %v, want %d %v", s.st.Steps, s.st.LR, o.st.Steps, o.st.LR)
	case fmt.Sprint(s.st.Slots) != fmt.Sprint(o.st.Slots):
		return fmt.Sprintf("optimizer slots %v, want %v", s.st.Slots, o.st.Slots)
	case fmt.Sprint(s.pro) != fmt.Sprint(o.pro):
		return fmt.Sprintf("progress %+v, want %+v", s.pro, o.pro)
	}
	return ""
}

// TestElasticStateCommitRestore: Restore brings back exactly what the last
// Commit saw (values of both types, the optimizer's step count, learning
// rate and momentum, the caller's fields), although the update right after
// the Commit ran while its copy could still be in progress, and later
// steps, a new learning rate and new fields changed everything.
func TestElasticStateCommitRestore(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		opt, ps := elasticModel(t, rt, r)
		pro := &progress{Epoch: 1}
		st, err := hvd.NewElasticState(opt, pro)
		if err != nil {
			return err
		}
		for k := range 3 {
			if err := trainStep(ctx, opt, ps, float64(k+r)); err != nil {
				return err
			}
		}
		pro.Batch, pro.Loss, pro.Seen = 3, 0.25, []int{4, 5}
		if err := st.Commit(); err != nil {
			return err
		}
		want := snap(opt, ps, pro)
		for k := range 2 { // the first update races the commit's copy unless Step waits
			if err := trainStep(ctx, opt, ps, float64(7+k)); err != nil {
				return err
			}
		}
		opt.SetLR(0.5)
		pro.Epoch, pro.Batch, pro.Loss, pro.Seen = 2, 0, 0, nil
		if d := snap(opt, ps, pro).diff(want); d == "" {
			return errors.New("the steps after the commit changed nothing")
		}
		if err := st.Restore(); err != nil {
			return err
		}
		if d := snap(opt, ps, pro).diff(want); d != "" {
			return fmt.Errorf("after Restore: %s", d)
		}
		if n := st.Commits(); n != 2 {
			return fmt.Errorf("Commits() = %d, want 2", n)
		}
		return nil
	})
}

// TestElasticStateSync: after Sync every rank holds rank 0's values,
// optimizer state and fields, also as its commit.
func TestElasticStateSync(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	wants, gots := make([]snapshotOf, 3), make([]snapshotOf, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		opt, ps := elasticModel(t, rt, r)
		pro := &progress{Epoch: 5 + r, Batch: r, Seen: []int{r}}
		st, err := hvd.NewElasticState(opt, pro)
		if err != nil {
			return err
		}
		// Ranks diverge as ranks that joined late would: local updates.
		opt.Inner().SetLR(float64(r + 1))
		for _, p := range ps {
			for i := range p.Grad {
				p.Grad[i] = float64(r)
			}
			for i := range p.Grad32 {
				p.Grad32[i] = float32(r)
			}
		}
		if err := opt.Inner().Step(ctx); err != nil {
			return err
		}
		wants[r] = snap(opt, ps, pro)
		if err := st.Sync(ctx, rt); err != nil {
			return err
		}
		got := snap(opt, ps, pro)
		gots[r] = got
		if err := trainStep(ctx, opt, ps, 3); err != nil {
			return err
		}
		pro.Epoch = 99
		if err := st.Restore(); err != nil {
			return err
		}
		if d := snap(opt, ps, pro).diff(got); d != "" {
			return fmt.Errorf("Restore after Sync: %s", d)
		}
		return nil
	})
	if wants[1].diff(wants[0]) == "" {
		t.Fatal("the ranks did not diverge before Sync")
	}
	for r, got := range gots {
		if d := got.diff(wants[0]); d != "" {
			t.Errorf("rank %d after Sync: %s (want rank 0's state before it)", r, d)
		}
	}
}

// TestElasticStateFields: a field must be a non-nil pointer; one gob cannot
// encode fails Commit and leaves the last commit in place.
func TestElasticStateFields(t *testing.T) {
	p := hvd.NewParam("w", 2)
	sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []any{nil, progress{}, (*progress)(nil)} {
		if _, err := hvd.NewElasticState(sgd, f); !errors.Is(err, hvd.ErrElasticState) {
			t.Errorf("field %#v: err = %v, want ErrElasticState", f, err)
		}
	}
	if _, err := hvd.NewElasticState(nil); !errors.Is(err, hvd.ErrElasticState) {
		t.Errorf("nil optimizer: err = %v", err)
	}
	ch := make(chan int)
	if _, err := hvd.NewElasticState(sgd, &ch); !errors.Is(err, hvd.ErrElasticState) {
		t.Fatalf("a channel field: err = %v, want ErrElasticState", err)
	}
	pro := &progress{Epoch: 1}
	st, err := hvd.NewElasticState(sgd, pro)
	if err != nil {
		t.Fatal(err)
	}
	p.Grad[0], pro.Epoch = -3, 2
	if err := sgd.Step(context.Background()); err != nil { // 0 - 1·(-3)
		t.Fatal(err)
	}
	if err := st.Commit(); err != nil {
		t.Fatal(err)
	}
	p.Grad[0], pro.Epoch = 1, 3
	if err := sgd.Step(context.Background()); err != nil { // waits for the commit's copy
		t.Fatal(err)
	}
	if p.Value[0] != 2 {
		t.Fatalf("the step left %v, want 2", p.Value[0])
	}
	if err := st.Restore(); err != nil {
		t.Fatal(err)
	}
	if p.Value[0] != 3 || pro.Epoch != 2 {
		t.Errorf("after Restore: value %v epoch %d, want 3 and 2", p.Value[0], pro.Epoch)
	}
}
