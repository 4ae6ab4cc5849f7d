package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// config is the example's flags.
type config struct {
	DataDir               string
	Epochs                int
	Batch                 int // global batch, split evenly among the ranks
	EvalBatch             int
	LR                    float64
	Solver                string // adam, sgd, momentum
	Arch                  arch
	TrainLimit, TestLimit int // 0: the whole split
	SynthTrain, SynthTest int
	Seed                  uint64
}

// epochStats is one epoch as rank 0 saw it.
type epochStats struct {
	Epoch    int
	Loss     float64 // mean training loss over the epoch, all ranks
	Accuracy float64 // on the test set, all ranks' shards
	Samples  int     // training samples of the epoch, all ranks
	Seconds  float64 // wall time of the epoch's training (not the test)
}

// summary is what train returns.
type summary struct {
	Note    string
	Epochs  []epochStats
	Weights [][]float32
}

func (c config) newSolver() (G.Solver, error) {
	switch c.Solver {
	case "adam":
		return G.NewAdamSolver(G.WithLearnRate(c.LR)), nil
	case "sgd":
		return G.NewVanillaSolver(G.WithLearnRate(c.LR)), nil
	case "momentum":
		return G.NewMomentum(G.WithLearnRate(c.LR), G.WithMomentum(0.9)), nil
	}
	return nil, fmt.Errorf("unknown solver %q (adam, sgd, momentum)", c.Solver)
}

// train trains the CNN on rt's rank: its shard of every epoch's shuffled
// training set, cfg.Batch/size images a step, the gradients averaged by
// hvdgorgonia's DistributedSolver; after each epoch every rank tests its
// shard of the test set and rank 0 writes the epoch to out.
func train(ctx context.Context, rt *hvd.Runtime, cfg config, out io.Writer) (summary, error) {
	var sum summary
	size, rank := rt.Size(), rt.Rank()
	if cfg.Batch%size != 0 {
		return sum, fmt.Errorf("the global batch %d does not split evenly among %d ranks", cfg.Batch, size)
	}
	per := cfg.Batch / size
	trainSet, testSet, note, err := loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed)
	if err != nil {
		return sum, err
	}
	trainSet.limit(cfg.TrainLimit)
	testSet.limit(cfg.TestLimit)
	sum.Note = fmt.Sprintf("%s: %d training and %d test images", note, trainSet.len(), testSet.len())
	if rank == 0 {
		fmt.Fprintf(out, "%s; %d ranks, global batch %d (%d a rank), solver %s lr %g\n", sum.Note, size, cfg.Batch, per, cfg.Solver, cfg.LR)
	}

	// Each rank draws its own initial weights; rank 0's are broadcast.
	g := G.NewGraph()
	weights := newWeights(g, cfg.Arch, rand.New(rand.NewPCG(cfg.Seed, uint64(rank))))
	tr, err := build(g, weights, per)
	if err != nil {
		return sum, err
	}
	if _, err := G.Grad(tr.loss, weights...); err != nil {
		return sum, err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(weights...))
	defer vm.Close()
	if err := hvdgorgonia.BroadcastLearnables(ctx, rt, weights, 0); err != nil {
		return sum, err
	}
	inner, err := cfg.newSolver()
	if err != nil {
		return sum, err
	}
	solver, err := hvdgorgonia.NewDistributedSolver(inner, rt, hvdgorgonia.Options{Context: ctx})
	if err != nil {
		return sum, err
	}

	// The evaluation graph reads the training graph's weights.
	eg := G.NewGraph()
	ev, err := build(eg, inputsOf(eg, cfg.Arch), cfg.EvalBatch)
	if err != nil {
		return sum, err
	}
	evm := G.NewTapeMachine(eg)
	defer evm.Close()

	x := tensor.New(tensor.WithShape(per, 1, side, side), tensor.Of(tensor.Float32))
	y := tensor.New(tensor.WithShape(per, classes), tensor.Of(tensor.Float32))
	ex := tensor.New(tensor.WithShape(cfg.EvalBatch, 1, side, side), tensor.Of(tensor.Float32))
	ey := tensor.New(tensor.WithShape(cfg.EvalBatch, classes), tensor.Of(tensor.Float32))
	steps := trainSet.len() / size / per
	if steps == 0 {
		return sum, fmt.Errorf("%d training images are less than one global batch of %d", trainSet.len(), cfg.Batch)
	}
	for epoch := range cfg.Epochs {
		shard := hvd.ShuffledShard(trainSet.len(), size, rank, cfg.Seed, epoch)
		start := time.Now()
		var lossSum float64
		for step := range steps {
			fill(trainSet, shard[step*per:(step+1)*per], x, y)
			if err := G.Let(tr.x, x); err != nil {
				return sum, err
			}
			if err := G.Let(tr.y, y); err != nil {
				return sum, err
			}
			if err := vm.RunAll(); err != nil {
				return sum, err
			}
			lossSum += float64(tr.loss.Value().Data().(float32))
			if err := solver.Step(G.NodesToValueGrads(weights)); err != nil {
				return sum, err
			}
			vm.Reset()
		}
		secs := time.Since(start).Seconds()

		// Test: every rank its shard, in batches padded with zero images.
		for i, w := range weights {
			if err := G.Let(ev.weights[i], w.Value()); err != nil {
				return sum, err
			}
		}
		tshard := hvd.Shard(testSet.len(), size, rank)
		var right int
		for lo := 0; lo < len(tshard); lo += cfg.EvalBatch {
			idx := tshard[lo:min(lo+cfg.EvalBatch, len(tshard))]
			fill(testSet, idx, ex, ey)
			if err := G.Let(ev.x, ex); err != nil {
				return sum, err
			}
			if err := G.Let(ev.y, ey); err != nil {
				return sum, err
			}
			if err := evm.RunAll(); err != nil {
				return sum, err
			}
			right += correct(testSet, idx, ev.logits.Value().Data().([]float32))
			evm.Reset()
		}
		tot := []float64{lossSum, float64(right), float64(len(tshard))}
		if err := rt.Allreduce(ctx, hvd.NewTensor("gorgonia-example/metrics", tot), kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return sum, err
		}
		e := epochStats{Epoch: epoch + 1, Loss: tot[0] / float64(steps*size), Accuracy: tot[1] / tot[2], Samples: steps * cfg.Batch, Seconds: secs}
		sum.Epochs = append(sum.Epochs, e)
		if rank == 0 {
			fmt.Fprintf(out, "epoch %d: loss %.4f, test accuracy %.4f, %d samples in %.1f s: %.0f samples/s\n",
				e.Epoch, e.Loss, e.Accuracy, e.Samples, e.Seconds, float64(e.Samples)/e.Seconds)
		}
	}
	for _, w := range weights {
		sum.Weights = append(sum.Weights, append([]float32(nil), w.Value().Data().([]float32)...))
	}
	return sum, nil
}
