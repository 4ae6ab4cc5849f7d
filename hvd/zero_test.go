package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/compress"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// zeroModel is two float64 and two float32 parameters: 11 float64 and 3
// float32 values, counts that 2, 3 and 4 ranks do not divide, and a
// float32 bucket smaller than 4 ranks (one rank's piece of it is empty).
// The values are the same on every rank.
func zeroModel() []*hvd.Param {
	ps := []*hvd.Param{hvd.NewParam("a", 7), hvd.NewParam32("b", 2), hvd.NewParam("c", 4), hvd.NewParam32("d", 1)}
	for k, p := range ps {
		for i := range p.Value {
			p.Value[i] = float64(k+1) - 0.25*float64(i)
		}
		for i := range p.Value32 {
			p.Value32[i] = float32(k+1) + 0.5*float32(i)
		}
	}
	return ps
}

// zeroOptimizers are the wrapped optimizers the tests run sharded.
var zeroOptimizers = []struct {
	name string
	make func([]*hvd.Param) (hvd.Optimizer, error)
}{
	{"sgd", func(ps []*hvd.Param) (hvd.Optimizer, error) { return hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.125}) }},
	{"momentum", func(ps []*hvd.Param) (hvd.Optimizer, error) {
		return hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.125, Momentum: 0.875, WeightDecay: 0.0625})
	}},
	{"nesterov", func(ps []*hvd.Param) (hvd.Optimizer, error) {
		return hvd.NewSGD(ps, hvd.SGDConfig{LR: 0.125, Momentum: 0.875, Nesterov: true})
	}},
	{"adam", func(ps []*hvd.Param) (hvd.Optimizer, error) {
		return hvd.NewAdam(ps, hvd.AdamConfig{LR: 0.01, WeightDecay: 0.01})
	}},
}

// zeroGrads fills the gradients for rank r's pass: small integers (whose
// sums are exact in any order) or uniform values in [-1, 1) from rng.
func zeroGrads(ps []*hvd.Param, r, pass int, rng *rand.Rand) {
	g := func(k, i int) float64 {
		if rng != nil {
			return 2*rng.Float64() - 1
		}
		return float64((r+1)*(i+k+pass)%7 - 3)
	}
	for k, p := range ps {
		for i := range p.Grad {
			p.Grad[i] = g(k, i)
		}
		for i := range p.Grad32 {
			p.Grad32[i] = float32(g(k, i))
		}
	}
}

// zeroPair is a model under an unsharded and under a sharded
// DistributedOptimizer of the same kind, on one rank.
type zeroPair struct {
	plain, sharded       *hvd.DistributedOptimizer
	plainPs, shardedPs   []*hvd.Param
	plainRng, shardedRng *rand.Rand
}

func newZeroPair(rt *hvd.Runtime, mk func([]*hvd.Param) (hvd.Optimizer, error), opts hvd.DistributedOptions, random bool) (*zeroPair, error) {
	return newZeroPairOf(zeroModel, rt, mk, opts, random)
}

func newZeroPairOf(model func() []*hvd.Param, rt *hvd.Runtime, mk func([]*hvd.Param) (hvd.Optimizer, error), opts hvd.DistributedOptions, random bool) (*zeroPair, error) {
	z := &zeroPair{plainPs: model(), shardedPs: model()}
	for i, ps := range [][]*hvd.Param{z.plainPs, z.shardedPs} {
		inner, err := mk(ps)
		if err != nil {
			return nil, err
		}
		o := opts
		o.ShardState = i == 1
		d, err := hvd.NewDistributedOptimizer(inner, rt, o)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			z.plain = d
		} else {
			z.sharded = d
		}
	}
	if random {
		z.plainRng = rand.New(rand.NewPCG(uint64(rt.Rank()), 7))
		z.shardedRng = rand.New(rand.NewPCG(uint64(rt.Rank()), 7))
	}
	return z, nil
}

// step runs one backward pass and Step on both.
func (z *zeroPair) step(ctx context.Context, r, pass int) error {
	zeroGrads(z.plainPs, r, pass, z.plainRng)
	if err := z.plain.Step(ctx); err != nil {
		return err
	}
	zeroGrads(z.shardedPs, r, pass, z.shardedRng)
	return z.sharded.Step(ctx)
}

// compare reports the first value or state element where the two differ
// by more than tol (relative, at least 1; tol 0: bit for bit).
func (z *zeroPair) compare(tol32, tol64 float64) error {
	for k, p := range z.plainPs {
		q := z.shardedPs[k]
		for i := range p.Value {
			if !zeroNear(p.Value[i], q.Value[i], tol64) {
				return fmt.Errorf("%s[%d] = %v sharded, %v unsharded", p.Name, i, q.Value[i], p.Value[i])
			}
		}
		for i := range p.Value32 {
			if !zeroNear(float64(p.Value32[i]), float64(q.Value32[i]), tol32) {
				return fmt.Errorf("%s[%d] = %v sharded, %v unsharded", p.Name, i, q.Value32[i], p.Value32[i])
			}
		}
	}
	want, got := z.plain.State(), z.sharded.State()
	if got.Steps != want.Steps || got.LR != want.LR || len(got.Slots) != len(want.Slots) {
		return fmt.Errorf("state: %d steps, lr %v, %d slots sharded; %d, %v, %d unsharded", got.Steps, got.LR, len(got.Slots), want.Steps, want.LR, len(want.Slots))
	}
	for name, w := range want.Slots {
		g := got.Slots[name]
		if len(g) != len(w) {
			return fmt.Errorf("slot %q has %d values sharded, %d unsharded", name, len(g), len(w))
		}
		tol := tol64
		if strings.HasSuffix(name, "/b") || strings.HasSuffix(name, "/d") {
			tol = tol32 // the state of a float32 parameter, from float32 gradients
		}
		for i := range w {
			if !zeroNear(w[i], g[i], tol) {
				return fmt.Errorf("slot %q[%d] = %v sharded, %v unsharded", name, i, g[i], w[i])
			}
		}
	}
	return nil
}

func zeroNear(a, b, tol float64) bool {
	if tol == 0 {
		return math.Float64bits(a) == math.Float64bits(b)
	}
	return math.Abs(a-b) <= tol*max(1, math.Abs(a))
}

// TestShardStateMatchesUnsharded: at 1 to 4 ranks, with SGD, momentum,
// Nesterov and Adam, over float64 and float32 parameters whose counts the
// ranks do not divide, the sharded optimizer ends every step with the
// parameters and the (gathered) state of the unsharded one, bit for bit,
// where the gradients' sums are exact in any order (small integers,
// summed); and with the average of random gradients bit for bit at 1 and 2
// ranks and within a few units of the last place at 3 and 4, where the
// reduce-scatter may add the ranks' terms in another order than the
// all-reduce.
func TestShardStateMatchesUnsharded(t *testing.T) {
	for n := 1; n <= 4; n++ {
		rts := hvdtest.Start(t, n)
		for _, oc := range zeroOptimizers {
			for _, random := range []bool{false, true} {
				opts := hvd.DistributedOptions{Op: kernels.Sum}
				tol32, tol64 := 0.0, 0.0
				if random {
					opts.Op = kernels.Average
					if n > 2 {
						// An averaged gradient may differ in its last bit
						// (the sum of three terms in another order); the
						// updates carry that over, without growing it much
						// in 5 steps of these optimizers: 4 units of the
						// last place of a float32 (2^-21 relative, for the
						// float32 parameters and their state) and 1e-13 for
						// float64 (seen: 1 unit, 1.1e-16).
						tol32, tol64 = 0x1p-21, 1e-13
					}
				}
				t.Run(fmt.Sprintf("np%d/%s/random=%v", n, oc.name, random), func(t *testing.T) {
					each(t, rts, func(r int, rt *hvd.Runtime) error {
						ctx := context.Background()
						z, err := newZeroPair(rt, oc.make, opts, random)
						if err != nil {
							return err
						}
						for s := range 5 {
							if err := z.step(ctx, r, s); err != nil {
								return err
							}
							if err := z.compare(tol32, tol64); err != nil {
								return fmt.Errorf("after step %d: %w", s+1, err)
							}
						}
						return nil
					})
				})
			}
		}
	}
}

// TestShardStateBuckets: parameters of more than 16 MiB in all are
// reduce-scattered in several buckets (here two float64 ones and a float32
// one, each split 3 ways), with the same result as unsharded, bit for bit.
func TestShardStateBuckets(t *testing.T) {
	model := func() []*hvd.Param {
		ps := []*hvd.Param{hvd.NewParam("big1", 1_500_001), hvd.NewParam32("small", 3), hvd.NewParam("big2", 2_000_003)}
		for _, p := range ps {
			for i := range p.Value {
				p.Value[i] = float64(i % 5)
			}
		}
		return ps
	}
	each(t, hvdtest.Start(t, 3), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPairOf(model, rt, zeroOptimizers[1].make, hvd.DistributedOptions{Op: kernels.Sum}, false)
		if err != nil {
			return err
		}
		for s := range 2 {
			if err := z.step(ctx, r, s); err != nil {
				return err
			}
		}
		lo, hi, _ := z.sharded.ShardRange("big2")
		if want := []int{0, 666_668, 1_333_336, 2_000_003}; lo != want[r] || hi != want[r+1] {
			return fmt.Errorf("rank %d keeps big2[%d:%d], want [%d:%d] (a bucket of its own)", r, lo, hi, want[r], want[r+1])
		}
		return z.compare(0, 0)
	})
}

// TestShardStateBackwardPasses: with BackwardPassesPerStep 4 the sharded
// optimizer accumulates the passes as the unsharded one does, bit for bit
// (the passes' mean of small integers is exact).
func TestShardStateBackwardPasses(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[3].make, hvd.DistributedOptions{Op: kernels.Sum, BackwardPassesPerStep: 4}, false)
		if err != nil {
			return err
		}
		for pass := range 12 {
			if err := z.step(ctx, r, pass); err != nil {
				return err
			}
		}
		if st := z.sharded.State(); st.Steps != 3 {
			return fmt.Errorf("%d steps after 12 passes of 4, want 3", st.Steps)
		}
		return z.compare(0, 0)
	})
}

// TestShardStateBytes: each rank keeps Adam's two moments only for its
// part, 1/size of the values give or take one per element type; the
// parts add up to the unsharded state.
func TestShardStateBytes(t *testing.T) {
	const n = 4
	rts := hvdtest.Start(t, n)
	got := make([]int64, n)
	var whole int64
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		z, err := newZeroPair(rt, zeroOptimizers[3].make, hvd.DistributedOptions{}, false)
		if err != nil {
			return err
		}
		got[r] = z.sharded.StateBytes()
		if r == 0 {
			whole = z.plain.StateBytes()
		}
		return nil
	})
	if whole != 2*8*14 {
		t.Fatalf("unsharded Adam keeps %d bytes of state for 14 values, want %d", whole, 2*8*14)
	}
	// float64 11 values: 3 3 3 2; float32 3 values: 1 1 1 0.
	want := []int64{2 * 8 * 4, 2 * 8 * 4, 2 * 8 * 4, 2 * 8 * 2}
	var sum int64
	for r := range got {
		sum += got[r]
		if got[r] != want[r] {
			t.Errorf("rank %d keeps %d bytes, want %d", r, got[r], want[r])
		}
	}
	if sum != whole {
		t.Errorf("the ranks keep %d bytes in all, the unsharded optimizer %d", sum, whole)
	}
}

// TestShardStateCheckpoint: a checkpoint of the sharded optimizer equals
// the unsharded one's, bit for bit, and restoring it into a sharded
// optimizer of a job of another size (3 ranks to 2) goes on as the
// unsharded optimizer does.
func TestShardStateCheckpoint(t *testing.T) {
	var saved *hvd.Checkpoint
	opts := hvd.DistributedOptions{Op: kernels.Sum}
	each(t, hvdtest.Start(t, 3), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[3].make, opts, false)
		if err != nil {
			return err
		}
		for s := range 3 {
			if err := z.step(ctx, r, s); err != nil {
				return err
			}
		}
		want, ck := hvd.NewCheckpoint(z.plain, 0, 3), hvd.NewCheckpoint(z.sharded, 0, 3)
		if !reflect.DeepEqual(ck, want) {
			return fmt.Errorf("the sharded optimizer's checkpoint %+v differs from the unsharded one's %+v", ck, want)
		}
		if r == 0 {
			saved = ck
		}
		return nil
	})
	each(t, hvdtest.Start(t, 2), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[3].make, opts, false)
		if err != nil {
			return err
		}
		if err := saved.Restore(z.plain); err != nil {
			return err
		}
		if err := saved.Restore(z.sharded); err != nil {
			return err
		}
		if err := z.compare(0, 0); err != nil {
			return fmt.Errorf("restored: %w", err)
		}
		for s := range 2 {
			if err := z.step(ctx, r, 3+s); err != nil {
				return err
			}
		}
		return z.compare(0, 0)
	})
}

// TestShardStateBroadcast: BroadcastOptimizerState of a sharded optimizer
// leaves every rank with the gathered state (here rank 0's learning rate
// and step count) and its own part of it.
func TestShardStateBroadcast(t *testing.T) {
	each(t, hvdtest.Start(t, 3), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[1].make, hvd.DistributedOptions{Op: kernels.Sum}, false)
		if err != nil {
			return err
		}
		if err := z.step(ctx, r, 0); err != nil {
			return err
		}
		z.sharded.SetLR(float64(r + 1))
		z.plain.SetLR(1)
		if err := hvd.BroadcastOptimizerState(ctx, rt, z.sharded, 0); err != nil {
			return err
		}
		if lr := z.sharded.LR(); lr != 1 {
			return fmt.Errorf("lr %v after the broadcast, want rank 0's 1", lr)
		}
		if err := z.step(ctx, r, 1); err != nil {
			return err
		}
		return z.compare(0, 0)
	})
}

// TestShardStateElasticReshard: an elastic state of a sharded optimizer
// commits the whole state; when the job of 3 ranks loses one, the 2 that
// re-form restore their commit, are re-sharded for the new size, sync, and
// train on exactly as the unsharded optimizer does in the same job.
func TestShardStateElasticReshard(t *testing.T) {
	type worker struct {
		z      *zeroPair
		plain  *hvd.ElasticState
		shared *hvd.ElasticState
	}
	ws := make([]*worker, 3)
	opts := hvd.DistributedOptions{Op: kernels.Sum}
	each(t, hvdtest.Start(t, 3), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[3].make, opts, false)
		if err != nil {
			return err
		}
		w := &worker{z: z}
		if w.plain, err = hvd.NewElasticState(z.plain); err != nil {
			return err
		}
		if w.shared, err = hvd.NewElasticState(z.sharded); err != nil {
			return err
		}
		ws[r] = w
		for s := range 3 {
			if err := z.step(ctx, r, s); err != nil {
				return err
			}
		}
		if err := w.plain.Commit(); err != nil {
			return err
		}
		if err := w.shared.Commit(); err != nil {
			return err
		}
		return z.step(ctx, r, 3) // lost: the job fails before the next commit
	})
	each(t, hvdtest.Start(t, 2), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		w := ws[r]
		for _, st := range []*hvd.ElasticState{w.plain, w.shared} {
			if err := st.Restore(); err != nil {
				return err
			}
			st.Attach(rt)
			if err := st.Sync(ctx, rt); err != nil {
				return err
			}
		}
		if err := w.z.compare(0, 0); err != nil {
			return fmt.Errorf("after the re-formation: %w", err)
		}
		if st := w.z.sharded.State(); st.Steps != 3 {
			return fmt.Errorf("%d steps after restoring the commit of step 3", st.Steps)
		}
		for s := range 3 {
			if err := w.z.step(ctx, r, 10+s); err != nil {
				return err
			}
		}
		return w.z.compare(0, 0)
	})
}

// TestShardStateUnsupported: ShardState with Adasum, compressed gradients
// or an optimizer it cannot rebuild over a part is an error.
func TestShardStateUnsupported(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	ps := zeroModel()
	sgd, err := hvd.NewSGD(ps, hvd.SGDConfig{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []hvd.DistributedOptions{
		{ShardState: true, Op: kernels.Adasum},
		{ShardState: true, Compression: hvd.FP16Compression},
		{ShardState: true, Hook: &compress.TopK{Fraction: 0.5}},
	} {
		if _, err := hvd.NewDistributedOptimizer(sgd, rt, o); !errors.Is(err, hvd.ErrInvalidArgument) {
			t.Errorf("%+v: err = %v, want ErrInvalidArgument", o, err)
		}
	}
	other := &notShardable{sgd}
	if _, err := hvd.NewDistributedOptimizer(other, rt, hvd.DistributedOptions{ShardState: true}); !errors.Is(err, hvd.ErrInvalidParam) {
		t.Errorf("an optimizer of another package: err = %v, want ErrInvalidParam", err)
	}
}

// notShardable is an optimizer of another package.
type notShardable struct{ hvd.Optimizer }

// TestShardStateSynchronize: after Synchronize each rank's pieces of the
// gradients (ShardRange) hold the average the unsharded optimizer puts in
// the whole gradient; Step then updates without synchronizing again.
func TestShardStateSynchronize(t *testing.T) {
	each(t, hvdtest.Start(t, 3), func(r int, rt *hvd.Runtime) error {
		ctx := context.Background()
		z, err := newZeroPair(rt, zeroOptimizers[0].make, hvd.DistributedOptions{Op: kernels.Sum}, false)
		if err != nil {
			return err
		}
		zeroGrads(z.plainPs, r, 0, nil)
		zeroGrads(z.shardedPs, r, 0, nil)
		if err := z.plain.Synchronize(ctx); err != nil {
			return err
		}
		if err := z.sharded.Synchronize(ctx); err != nil {
			return err
		}
		for k, p := range z.plainPs {
			q := z.shardedPs[k]
			lo, hi, _ := z.sharded.ShardRange(p.Name)
			if p.Is32() {
				if !slices.Equal(p.Grad32[lo:hi], q.Grad32[lo:hi]) {
					return fmt.Errorf("%s[%d:%d] = %v sharded, %v unsharded", p.Name, lo, hi, q.Grad32[lo:hi], p.Grad32[lo:hi])
				}
			} else if !slices.Equal(p.Grad[lo:hi], q.Grad[lo:hi]) {
				return fmt.Errorf("%s[%d:%d] = %v sharded, %v unsharded", p.Name, lo, hi, q.Grad[lo:hi], p.Grad[lo:hi])
			}
		}
		if err := z.plain.Step(ctx); err != nil {
			return err
		}
		if err := z.sharded.Step(ctx); err != nil {
			return err
		}
		return z.compare(0, 0)
	})
}
