package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// elasticProgress is the part of an elastic run's state that is the
// program's own: steps done and the current epoch's loss and timing.
type elasticProgress struct {
	Step    int64
	LossSum float64
	LossN   int
	Samples int
	Seconds float64 // of the epoch, before the current formation
}

// trainElastic runs cfg as a worker of an elastic job (gorun --min-np):
// the epoch's samples come from an hvd.ElasticSampler, the model, the
// optimizer state, the sampler and the progress are committed every
// cfg.CommitEvery steps, and hvd.RunElastic forms the job anew (rolling
// back to the last commit) whenever ranks are lost or added. The learning
// rate follows each formation's size. The rank 0 of each formation
// writes the progress to out.
func trainElastic(ctx context.Context, cfg config, out io.Writer) error {
	ecfg, err := hvd.ElasticConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	trainSet, testSet, note, err := loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed)
	if err != nil {
		return err
	}
	trainSet, testSet = trainSet.first(cfg.LimitTrain), testSet.first(cfg.LimitTest)
	m, err := newModel(cfg.Model, cfg.Hidden, cfg.Seed)
	if err != nil {
		return err
	}
	inner, err := newOptimizer(cfg, m.params())
	if err != nil {
		return err
	}
	sampler, err := hvd.NewElasticSampler(trainSet.len(), cfg.Batch, cfg.Seed, true)
	if err != nil {
		return err
	}
	prog := &elasticProgress{}
	// With -shard-state the optimizer state lives in the
	// DistributedOptimizer, a part on each rank: it is made once, over a
	// runtime of one rank until the first formation, and the elastic state
	// keeps it, so that RunElastic re-shards it at each formation and
	// commits gather the whole. Otherwise the state keeps the wrapped
	// optimizer, and each formation wraps it anew.
	var sharded *hvd.DistributedOptimizer
	var kept hvd.Optimizer = inner
	if cfg.ShardState {
		solo, err := hvd.NewRuntime(ctx, hvd.DefaultConfig())
		if err != nil {
			return err
		}
		defer solo.Shutdown()
		dopts, err := cfg.distributedOptions()
		if err != nil {
			return err
		}
		if sharded, err = hvd.NewDistributedOptimizer(inner, solo, dopts); err != nil {
			return err
		}
		kept = sharded
	}
	state, err := hvd.NewElasticState(kept, sampler, prog)
	if err != nil {
		return err
	}
	ecfg.OnReset = func(_ context.Context, rt *hvd.Runtime) error {
		if rt.Rank() == 0 {
			fmt.Fprintf(out, "the job was formed anew: %d ranks, going on from step %d (epoch %d, %d of %d samples done)\n",
				rt.Size(), prog.Step, sampler.Epoch+1, sampler.Processed, sampler.N)
		}
		return nil
	}
	first := true
	return hvd.RunElastic(ctx, ecfg, state, func(ctx context.Context, rt *hvd.Runtime) error {
		setThreads(cfg.threads(rt.LocalSize()))
		t := &trainer{rt: rt, cfg: cfg, m: m, train: trainSet, test: testSet, labels: make([]uint8, cfg.Batch)}
		if rt.Rank() == 0 {
			t.out = out
		}
		if first {
			t.printf("%s\n", note)
			first = false
		}
		if sharded != nil {
			t.opt = sharded // bound to rt, and re-sharded, by RunElastic
			t.printf("optimizer state sharded: %d bytes on rank 0 of %d ranks\n", t.opt.StateBytes(), rt.Size())
		} else {
			dopts, err := cfg.distributedOptions()
			if err != nil {
				return err
			}
			if t.opt, err = hvd.NewDistributedOptimizer(inner, rt, dopts); err != nil {
				return err
			}
		}
		t.sched = hvd.LRSchedule{Base: cfg.LR, Size: rt.Size(), WarmupEpochs: cfg.Warmup, Milestones: cfg.Milestones, Gamma: cfg.Gamma}
		return t.elasticEpochs(ctx, sampler, state, prog)
	})
}

// elasticEpochs trains the epochs left on this formation of the job.
func (t *trainer) elasticEpochs(ctx context.Context, s *hvd.ElasticSampler, state *hvd.ElasticState, prog *elasticProgress) error {
	size := t.rt.Size()
	logEvery := int64(t.cfg.LogEvery)
	if logEvery <= 0 {
		logEvery = int64(max(s.N/(size*t.cfg.Batch)/10, 1))
	}
	for s.Epoch < t.cfg.Epochs {
		start := time.Now()
		for s.StepsLeft(size) > 0 {
			t.opt.SetLR(t.sched.At(float64(s.Epoch) + float64(s.Processed)/float64(s.N)))
			batch := s.Batch(t.rt.Rank(), size)
			loss, err := t.elasticStep(ctx, batch)
			if err != nil {
				return err
			}
			s.Advance(size)
			prog.Step++
			prog.LossSum, prog.LossN = prog.LossSum+loss, prog.LossN+1
			prog.Samples += len(batch) * size
			t.rt.LogScalars(prog.Step, map[string]float64{"loss": loss, "lr": t.opt.LR(), "ranks": float64(size)}) // gorun --metrics-dir, --dashboard
			if prog.Step%int64(max(t.cfg.CommitEvery, 1)) == 0 {
				prog.Seconds += since(start)
				start = time.Now()
				if err := state.Commit(); err != nil {
					return err
				}
			}
			if prog.Step%logEvery == 0 {
				t.printf("epoch %d [%5d/%d] loss %.4f  lr %.4f  %d ranks\n", s.Epoch+1, s.Processed, s.N, prog.LossSum/float64(max(prog.LossN, 1)), t.opt.LR(), size)
			}
		}
		prog.Seconds += since(start)
		if err := t.elasticEndEpoch(ctx, s, prog); err != nil {
			return err
		}
		s.NextEpoch()
		*prog = elasticProgress{Step: prog.Step}
		if err := state.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// elasticStep trains one batch; a rank whose batch is empty (the epoch's
// last step can leave one without samples) contributes zero gradients.
func (t *trainer) elasticStep(ctx context.Context, batch []int) (float64, error) {
	if len(batch) > 0 {
		return t.trainStep(ctx, batch)
	}
	t.opt.ZeroGrad()
	return 0, t.opt.Step(ctx)
}

// elasticEndEpoch reports the epoch: its mean loss over the ranks and
// the test accuracy.
func (t *trainer) elasticEndEpoch(ctx context.Context, s *hvd.ElasticSampler, prog *elasticProgress) error {
	loss, err := hvd.AverageMetric(ctx, t.rt, "epoch/loss", prog.LossSum/float64(max(prog.LossN, 1)))
	if err != nil {
		return err
	}
	acc, err := t.evaluate(ctx)
	if err != nil {
		return err
	}
	t.printf("epoch %d: loss %.4f  test accuracy %.2f%%  %.0f samples/s (%.1f s)\n", s.Epoch+1, loss, 100*acc,
		float64(prog.Samples)/max(prog.Seconds, 1e-9), prog.Seconds)
	t.rt.LogScalars(prog.Step, map[string]float64{"epoch_loss": loss, "test_accuracy": acc})
	if s.Epoch+1 == t.cfg.Epochs {
		t.printf("final test accuracy %.2f%% after %d epochs on %d rank(s)\n", 100*acc, t.cfg.Epochs, t.rt.Size())
	}
	return nil
}
