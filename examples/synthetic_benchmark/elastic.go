package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// elasticRun is the benchmark run as an elastic job (-elastic, under
// gorun --min-np): SGD updates the model (so that the state has something
// to roll back), the state is committed after every step, and each reset
// is timed.
type elasticRun struct {
	b        *bench
	state    *hvd.ElasticState
	progress *struct{ Step int }
	total    int // steps to run: warm-up and timed

	changed time.Time     // when this worker last saw its formation end
	formed  time.Time     // when the last re-formation was synced
	resets  []string      // one line per reset
	commits time.Duration // spent in Commit on this worker
	ncommit int
	stepDur time.Duration // spent in steps (commits excluded)
}

// runElastic runs the benchmark under hvd.RunElastic and has the last
// formation's rank 0 report the resets and the cost of committing.
func runElastic(ctx context.Context, cfg config, specs []tensorSpec) error {
	ecfg, err := hvd.ElasticConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	b, err := newBench(cfg, specs, -1)
	if err != nil {
		return err
	}
	sgd, err := hvd.NewSGD(b.params, hvd.SGDConfig{LR: 1e-9})
	if err != nil {
		return err
	}
	e := &elasticRun{b: b, progress: &struct{ Step int }{}, total: cfg.Warmup + cfg.Iters*cfg.BatchesPerIter}
	if e.state, err = hvd.NewElasticState(sgd, e.progress); err != nil {
		return err
	}
	ecfg.OnReset = func(context.Context, *hvd.Runtime) error { e.formed = time.Now(); return nil }
	var last *hvd.Runtime
	err = hvd.RunElastic(ctx, ecfg, e.state, func(ctx context.Context, rt *hvd.Runtime) error {
		last = rt
		// Any error ends this formation: a step that failed because a
		// rank was lost, or a commit that saw the launcher's newer
		// generation (hvd.ErrHostsUpdated, which also comes from a step
		// when that generation leaves a rank out). Either way the reset
		// is timed from here.
		err := e.train(ctx, rt, sgd)
		if err != nil {
			e.changed = time.Now()
		}
		return err
	})
	if err != nil || last.Rank() != 0 {
		return err
	}
	for _, r := range e.resets {
		fmt.Println(r)
	}
	step := e.stepDur / time.Duration(max(e.ncommit, 1))
	commit := e.commits / time.Duration(max(e.ncommit, 1))
	fmt.Printf("Commit per step on rank 0: %v, %.2f%% of a step of %v\n", commit.Round(time.Microsecond),
		100*commit.Seconds()/step.Seconds(), step.Round(time.Millisecond))
	return nil
}

// train runs the steps left on this formation.
func (e *elasticRun) train(ctx context.Context, rt *hvd.Runtime, sgd hvd.Optimizer) error {
	b := e.b
	b.out = nil
	if rt.Rank() == 0 {
		b.out = os.Stdout
	}
	opts, err := b.cfg.options()
	if err != nil {
		return err
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, rt, opts)
	if err != nil {
		return err
	}
	first := !e.changed.IsZero()
	start := time.Now()
	for e.progress.Step < e.total {
		t0 := time.Now()
		if err := b.step(ctx, opt); err != nil {
			return err
		}
		e.progress.Step++
		t1 := time.Now()
		if first {
			e.resets = append(e.resets, fmt.Sprintf("Reset %d: %d ranks went on from step %d: formed and synced %v after this rank saw the job change, first step done %v after that",
				len(e.resets)+1, rt.Size(), e.progress.Step-1, e.formed.Sub(e.changed).Round(time.Microsecond), t1.Sub(e.formed).Round(time.Microsecond)))
			b.printf("%s\n", e.resets[len(e.resets)-1])
			first = false
		}
		if err := e.state.Commit(); err != nil {
			return err
		}
		e.commits += time.Since(t1)
		e.stepDur += t1.Sub(t0)
		e.ncommit++
		if n := e.progress.Step - b.cfg.Warmup; n > 0 && n%b.cfg.BatchesPerIter == 0 {
			rate := float64(b.cfg.Batch*b.cfg.BatchesPerIter) / time.Since(start).Seconds()
			b.printf("Iter #%d: %.1f img/sec per rank on %d ranks\n", n/b.cfg.BatchesPerIter-1, rate, rt.Size())
			start = time.Now()
		}
	}
	return nil
}
