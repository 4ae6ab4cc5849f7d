package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gorovod/gorovod/evaluator"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/jobenv"
)

// evaluate is -mode evaluator, the sidecar evaluator: it follows
// -checkpoint-dir (which need not exist yet) and scores every checkpoint
// that appears there once, on the whole test set, writing one JSON line
// per checkpoint to out. It stops after the checkpoint of -eval-final-step
// (0: of the last step the run's flags imply, in ps mode), after
// -eval-max evaluations, or on SIGINT or SIGTERM (gorun sends SIGTERM
// --evaluator-timeout after the chief has ended).
func evaluate(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.CkptDir == "" {
		return errors.New("-mode evaluator needs -checkpoint-dir, the directory the training job writes its checkpoints to")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The evaluator logs through slog's default logger, at the job's log
	// level (gorun --log-level) as the ranks do.
	if name := os.Getenv(jobenv.EnvLogLevel); name != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(name)); err != nil {
			return fmt.Errorf("%s=%q: %w", jobenv.EnvLogLevel, name, err)
		}
		slog.SetLogLoggerLevel(level)
	}
	_, test, note, err := loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed)
	if err != nil {
		return err
	}
	m, err := newModel(cfg.Model, cfg.Hidden, cfg.Seed)
	if err != nil {
		return err
	}
	final := cfg.EvalFinal
	if final == 0 && cfg.Mode == modePS {
		train, _, _, err := loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed)
		if err != nil {
			return err
		}
		final = psFinalStep(cfg, train.len())
	}
	fmt.Fprintf(os.Stderr, "mnist evaluator: %s; following %s until the checkpoint of step %d\n", note, cfg.CkptDir, final)
	sum, err := evaluator.Run(ctx, evaluator.Options{
		Dir:            cfg.CkptDir,
		Out:            out,
		FinalStep:      final,
		MaxEvaluations: cfg.EvalMax,
		Eval: func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) {
			if err := setParams(m, ck.Params); err != nil {
				return nil, err
			}
			loss, acc := testScore(m, test)
			return map[string]float64{"test_loss": loss, "test_accuracy": acc}, nil
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "mnist evaluator: %d checkpoints evaluated, %d files skipped; stopped: %s\n", sum.Evaluations, sum.Skipped, sum.Stopped)
	return nil
}

// setParams copies values (a checkpoint's, or pulled from the parameter
// servers) into m's parameters, which must all be there with their sizes.
func setParams(m *model, values map[string][]float64) error {
	ps := m.params()
	if len(values) != len(ps) {
		return fmt.Errorf("the checkpoint has %d parameters, the model %d: evaluate with the training run's -model and -hidden", len(values), len(ps))
	}
	for _, p := range ps {
		v, ok := values[p.Name]
		if !ok || len(v) != len(p.Value) {
			return fmt.Errorf("the checkpoint's %q has %d values, the model's %d: evaluate with the training run's -model and -hidden", p.Name, len(v), len(p.Value))
		}
		copy(p.Value, v)
	}
	return nil
}

// testScore is m's mean loss and accuracy on the whole of test.
func testScore(m *model, test *dataset) (loss, accuracy float64) {
	correct := 0
	labels := make([]uint8, 500)
	var x mat
	for lo := 0; lo < test.len(); lo += len(labels) {
		idx := make([]int, 0, len(labels))
		for i := lo; i < min(lo+len(labels), test.len()); i++ {
			idx = append(idx, i)
		}
		test.gather(idx, &x, labels)
		l, c, _ := m.loss(m.forward(&x), labels[:len(idx)])
		loss += l * float64(len(idx))
		correct += c
	}
	n := float64(max(test.len(), 1))
	return loss / n, float64(correct) / n
}
