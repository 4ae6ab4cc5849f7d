package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// trainer is one rank's training run.
type trainer struct {
	rt          *hvd.Runtime
	cfg         config
	m           *model
	opt         *hvd.DistributedOptimizer
	train, test *dataset
	ckpt        *hvd.Checkpointer
	sched       hvd.LRSchedule
	spe         int   // steps per epoch, the same on every rank
	step        int64 // steps done since the start of the run
	out         io.Writer
	x           mat
	labels      []uint8
}

// epochStats is what rank 0 reports after an epoch.
type epochStats struct {
	Epoch         int
	Loss          float64 // mean training loss over all ranks
	Accuracy      float64 // on the whole test set
	SamplesPerSec float64 // all ranks together
	Seconds       float64
}

// summary is the outcome of a run.
type summary struct {
	Epochs []epochStats
	Steps  int64
	Params []*hvd.Param
}

// train runs cfg on rt; rank 0 writes progress to out (nil: silent).
func train(ctx context.Context, rt *hvd.Runtime, cfg config, out io.Writer) (summary, error) {
	t, err := newTrainer(rt, cfg, out)
	if err != nil {
		return summary{}, err
	}
	if err := t.start(ctx); err != nil {
		return summary{}, err
	}
	var sum summary
	for epoch := int(t.step) / t.spe; epoch < cfg.Epochs; epoch++ {
		st, done, err := t.epoch(ctx, epoch)
		if err != nil {
			return summary{}, err
		}
		if !done {
			t.printf("stopped after step %d (-max-steps)\n", t.step)
			break
		}
		sum.Epochs = append(sum.Epochs, st)
	}
	if n := len(sum.Epochs); n > 0 {
		t.printf("final test accuracy %.2f%% after %d epochs on %d rank(s)\n", 100*sum.Epochs[n-1].Accuracy, cfg.Epochs, rt.Size())
	}
	sum.Steps, sum.Params = t.step, t.opt.Params()
	return sum, nil
}

func newTrainer(rt *hvd.Runtime, cfg config, out io.Writer) (*trainer, error) {
	t := &trainer{rt: rt, cfg: cfg, out: out, labels: make([]uint8, cfg.Batch)}
	var note string
	var err error
	if t.train, t.test, note, err = loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed); err != nil {
		return nil, err
	}
	t.train, t.test = t.train.first(cfg.LimitTrain), t.test.first(cfg.LimitTest)
	t.printf("%s\n", note)
	if t.m, err = newModel(cfg.Model, cfg.Hidden, cfg.Seed); err != nil {
		return nil, err
	}
	inner, err := newOptimizer(cfg, t.m.params())
	if err != nil {
		return nil, err
	}
	dopts, err := cfg.distributedOptions()
	if err != nil {
		return nil, err
	}
	size := rt.Size() // the learning rate's scale after warm-up
	if cfg.Adasum {
		// Adasum of parallel gradients is their average, of orthogonal ones
		// their sum: it scales itself, so the rate stays one rank's.
		size = 1
	}
	if t.opt, err = hvd.NewDistributedOptimizer(inner, rt, dopts); err != nil {
		return nil, err
	}
	if t.spe = hvd.StepsPerEpoch(t.train.len(), rt.Size(), cfg.Batch); t.spe == 0 {
		return nil, fmt.Errorf("%d training images are too few for %d ranks", t.train.len(), rt.Size())
	}
	t.sched = hvd.LRSchedule{Base: cfg.LR, Size: size, WarmupEpochs: cfg.Warmup, Milestones: cfg.Milestones, Gamma: cfg.Gamma}
	if cfg.CkptDir != "" {
		t.ckpt = &hvd.Checkpointer{Dir: cfg.CkptDir, Keep: cfg.Keep}
	}
	return t, nil
}

func newOptimizer(cfg config, ps []*hvd.Param) (hvd.Optimizer, error) {
	switch cfg.Optimizer {
	case "sgd":
		momentum := cfg.Momentum
		if cfg.TopK > 0 && cfg.dgcMomentum() != 0 {
			momentum = 0 // the top-k hook applies it (TopK.Momentum)
		}
		return hvd.NewSGD(ps, hvd.SGDConfig{LR: cfg.LR, Momentum: momentum, WeightDecay: cfg.WeightDecay})
	case "adam":
		return hvd.NewAdam(ps, hvd.AdamConfig{LR: cfg.LR, WeightDecay: cfg.WeightDecay, Decoupled: true})
	}
	return nil, fmt.Errorf("unknown optimizer %q (want sgd or adam)", cfg.Optimizer)
}

// start gives every rank rank 0's initial weights, or the checkpoint's.
func (t *trainer) start(ctx context.Context) error {
	if err := hvd.BroadcastParameters(ctx, t.rt, t.opt.Params(), 0); err != nil {
		return err
	}
	n := 0
	for _, p := range t.opt.Params() {
		n += len(p.Value)
	}
	t.printf("%s model, %d parameters, %d ranks × batch %d, %d steps per epoch, on %v with %s, gradients as %s\n",
		t.cfg.Model, n, t.rt.Size(), t.cfg.Batch, t.spe, t.rt.Device(), blasName, t.cfg.gradients())
	if t.cfg.ShardState {
		t.printf("optimizer state sharded: %d bytes on rank 0\n", t.opt.StateBytes())
	}
	if t.ckpt == nil || !t.cfg.Resume {
		return nil
	}
	return t.resume(ctx)
}

func (t *trainer) resume(ctx context.Context) error {
	ck, err := t.ckpt.LoadLatest(ctx, t.rt)
	if err != nil || ck == nil {
		t.printf("no checkpoint to resume from in %s\n", t.cfg.CkptDir)
		return err
	}
	if spe := ck.Meta["steps_per_epoch"]; spe != strconv.Itoa(t.spe) {
		return fmt.Errorf("the checkpoint of step %d has %s steps per epoch, this run %d: resume with the same -np and -batch", ck.Step, spe, t.spe)
	}
	if err := ck.Restore(t.opt); err != nil {
		return err
	}
	t.step, t.cfg.Seed = ck.Step, ck.Seed
	t.printf("resumed from step %d (epoch %d, step %d of it)\n", ck.Step, ck.Epoch+1, int(ck.Step)%t.spe)
	return nil
}

func (t *trainer) save() error {
	if t.ckpt == nil {
		return nil
	}
	ck := hvd.NewCheckpoint(t.opt, int(t.step)/t.spe, t.step)
	ck.Seed = t.cfg.Seed
	ck.Meta = map[string]string{"model": t.cfg.Model, "steps_per_epoch": strconv.Itoa(t.spe)}
	return t.ckpt.Save(t.rt, ck)
}

func (t *trainer) printf(format string, args ...any) {
	if t.out != nil {
		fmt.Fprintf(t.out, format, args...)
	}
}

// since is the time from start in seconds.
func since(start time.Time) float64 { return time.Since(start).Seconds() }
