// Command minimal is the README's training program, whole: a linear model
// fitted with data-parallel SGD. Every rank trains on its own shard of the
// data; gorun starts the ranks and hvd averages their gradients.
//
//	go build -o bin/ ./cmd/gorun ./examples/minimal
//	bin/gorun -np 4 bin/minimal
//
// Alone (bin/minimal) it is a job of one rank and learns the same line.
package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

func main() {
	ctx := context.Background()
	// Join the job gorun (or srun, mpirun, torchrun-style variables) started;
	// with no launcher this process is rank 0 of 1.
	if err := hvd.Init(ctx); err != nil {
		log.Fatal(err)
	}
	defer hvd.Shutdown()

	// The data: 4096 points of y = 3x - 1 plus noise, the same on every rank.
	rng := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([]float64, 4096), make([]float64, 4096)
	for i := range xs {
		xs[i] = rng.Float64()*2 - 1
		ys[i] = 3*xs[i] - 1 + 0.1*rng.NormFloat64()
	}

	// The model y = w·x + b, and its optimizer wrapped so that every step
	// applies the gradient averaged over all ranks.
	w, b := hvd.NewParam("w", 1), hvd.NewParam("b", 1)
	w.Value[0] = rng.Float64() // an arbitrary start: rank 0's wins below
	sgd, err := hvd.NewSGD([]*hvd.Param{w, b}, hvd.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		log.Fatal(err)
	}
	opt, err := hvd.NewDistributedOptimizer(sgd, nil, hvd.DistributedOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// Before the first step, every rank takes rank 0's parameters.
	if err := hvd.BroadcastParameters(ctx, nil, opt.Params(), 0); err != nil {
		log.Fatal(err)
	}

	const batch = 32 // per rank: the global batch is batch × hvd.Size()
	for epoch := range 5 {
		shard := hvd.ShuffledShard(len(xs), hvd.Size(), hvd.Rank(), 7, epoch)
		steps, loss := hvd.StepsPerEpoch(len(xs), hvd.Size(), batch), 0.0
		for step := range steps {
			opt.ZeroGrad() // gradients add up until zeroed
			idx := hvd.Batch(shard, len(xs)/hvd.Size(), batch, step)
			for _, i := range idx {
				d := w.Value[0]*xs[i] + b.Value[0] - ys[i]
				loss += d * d / float64(len(idx))
				w.Grad[0] += 2 * d * xs[i] / float64(len(idx))
				b.Grad[0] += 2 * d / float64(len(idx))
			}
			// Start these gradients' all-reduce now; Step waits for it,
			// writes the averages into Grad and updates the parameters.
			if err := opt.GradReady("w", "b"); err != nil {
				log.Fatal(err)
			}
			if err := opt.Step(ctx); err != nil {
				log.Fatal(err)
			}
		}
		loss, err = hvd.AverageMetric(ctx, nil, "loss", loss/float64(steps))
		if err != nil {
			log.Fatal(err)
		}
		if hvd.Rank() == 0 { // every rank holds the same model; one reports
			fmt.Printf("epoch %d: loss %.4f, w = %.3f, b = %.3f (np %d)\n",
				epoch+1, loss, w.Value[0], b.Value[0], hvd.Size())
		}
	}
}
