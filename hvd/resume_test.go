package hvd_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
)

// A small data-parallel linear regression that checkpoints every few
// steps, for the resume test.
const (
	rsSamples, rsDim, rsBatch = 48, 3, 4 // per-rank batch
	rsEpochs, rsEvery         = 3, 2     // checkpoint every rsEvery steps
	rsSeed                    = 11
)

var errKilled = errors.New("killed")

func rsData() (x [][]float64, y []float64) {
	rng := rand.New(rand.NewPCG(rsSeed, 0))
	for range rsSamples {
		row := make([]float64, rsDim)
		t := 0.5
		for j := range row {
			row[j] = rng.NormFloat64()
			t += float64(j+1) * row[j]
		}
		x, y = append(x, row), append(y, t+0.1*rng.NormFloat64())
	}
	return x, y
}

// rsTrain trains on rt from the latest checkpoint of c (or from scratch)
// and stops with errKilled after killAt steps in all (0: never). It
// records every step it takes and returns the final weights.
func rsTrain(rt *hvd.Runtime, c *hvd.Checkpointer, killAt int64, took *[]int64) ([]float64, error) {
	ctx := context.Background()
	x, y := rsData()
	w := hvd.NewParam("w", rsDim+1)
	w.Value[0] = float64(rt.Rank()) // ranks differ until the broadcast
	sgd, err := hvd.NewSGD([]*hvd.Param{w}, hvd.SGDConfig{LR: 0.05, Momentum: 0.9})
	if err != nil {
		return nil, err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{})
	if err != nil {
		return nil, err
	}
	if err := hvd.BroadcastParameters(ctx, rt, opt.Params(), 0); err != nil {
		return nil, err
	}
	start := int64(0)
	ck, err := c.LoadLatest(ctx, rt)
	if err != nil {
		return nil, err
	}
	if ck != nil {
		if err := ck.Restore(opt); err != nil {
			return nil, err
		}
		start = ck.Step
	}
	spe := int64(hvd.StepsPerEpoch(rsSamples, rt.Size(), rsBatch))
	for s := start; s < rsEpochs*spe; s++ {
		epoch := int(s / spe)
		shard := hvd.ShuffledShard(rsSamples, rt.Size(), rt.Rank(), rsSeed, epoch)
		rsGrad(w, x, y, hvd.Batch(shard, rsSamples/rt.Size(), rsBatch, int(s%spe)))
		if err := opt.Step(ctx); err != nil {
			return nil, err
		}
		*took = append(*took, s)
		if (s+1)%rsEvery == 0 {
			if err := c.Save(rt, hvd.NewCheckpoint(opt, int((s+1)/spe), s+1)); err != nil {
				return nil, err
			}
		}
		if s+1 == killAt {
			return nil, errKilled
		}
	}
	return slices.Clone(w.Value), nil
}

// rsGrad is the gradient of the mean squared error over the batch.
func rsGrad(w *hvd.Param, x [][]float64, y []float64, batch []int) {
	clear(w.Grad)
	for _, i := range batch {
		d := w.Value[rsDim] - y[i]
		for j, v := range x[i] {
			d += w.Value[j] * v
		}
		for j, v := range x[i] {
			w.Grad[j] += 2 * d * v / float64(len(batch))
		}
		w.Grad[rsDim] += 2 * d / float64(len(batch))
	}
}

// rsJob runs rsTrain on a fresh job of n ranks; it returns rank 0's
// weights and steps.
func rsJob(t *testing.T, n int, c *hvd.Checkpointer, killAt int64) ([]float64, []int64, error) {
	rts := hvdtest.Start(t, n)
	defer func() {
		for _, rt := range rts {
			rt.Shutdown() // the "kill": the job's runtimes go away
		}
	}()
	ws := make([][]float64, n)
	took := make([][]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, rt := range rts {
		wg.Go(func() { ws[r], errs[r] = rsTrain(rt, c, killAt, &took[r]) })
	}
	wg.Wait()
	for r := range n {
		if !reflect.DeepEqual(ws[r], ws[0]) {
			t.Fatalf("rank %d ended with %v, rank 0 with %v", r, ws[r], ws[0])
		}
	}
	return ws[0], took[0], errors.Join(errs...)
}

func TestResumeFromTheLastCheckpoint(t *testing.T) {
	const n = 2
	whole, took, err := rsJob(t, n, &hvd.Checkpointer{Dir: t.TempDir(), Keep: 2, Logger: quiet}, 0)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(rsEpochs * hvd.StepsPerEpoch(rsSamples, n, rsBatch))
	if int64(len(took)) != total {
		t.Fatalf("uninterrupted run took %d steps, want %d", len(took), total)
	}
	// Killed after step 9 (the last checkpoint is after step 8), with a
	// half-written temporary file and a damaged newer checkpoint beside it.
	c := &hvd.Checkpointer{Dir: t.TempDir(), Keep: 2, Logger: quiet}
	if _, took1, err := rsJob(t, n, c, 9); !errors.Is(err, errKilled) || len(took1) != 9 {
		t.Fatalf("first run: %d steps, %v", len(took1), err)
	}
	os.WriteFile(filepath.Join(c.Dir, ".checkpoint-4242.tmp"), []byte("GRVDCKP1 partial"), 0o644)
	os.WriteFile(c.Path(10), []byte("GRVDCKP1 torn write"), 0o644)
	resumed, took2, err := rsJob(t, n, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(8); took2[0] != want || int64(len(took2)) != total-want {
		t.Errorf("resumed run took steps %v, want %d..%d", took2, want, total-1)
	}
	if !reflect.DeepEqual(resumed, whole) {
		t.Errorf("resumed run ended at %v, the uninterrupted one at %v", resumed, whole)
	}
}
