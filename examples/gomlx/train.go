package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	hvdgomlx "github.com/gorovod/gorovod/frameworks/gomlx"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// config is what the flags set.
type config struct {
	data      string  // directory of the Fashion-MNIST IDX files
	synthetic bool    // use synthetic data instead
	trainN    int     // training examples used (0: all)
	testN     int     // test examples used (0: all)
	epochs    int     // passes over the training examples
	batch     int     // global batch: every rank takes batch/np examples a step
	lr        float64 // Adam's learning rate
	seed      uint64  // shuffling and initialization seed
	plain     bool    // one process, GoMLX's own optimizer unwrapped (for the overhead figure)
}

// result is what a run measured, the same on every rank but the times.
type result struct {
	accuracy float64       // on the test examples
	loss     float64       // last batch's loss on this rank
	steps    int           // train steps taken
	samples  int           // examples trained on, all ranks together
	wall     time.Duration // of the training loop, first step (compilation) included
	median   time.Duration // median train step, the adapter's Step included
}

// throughput is samples a second over the whole loop.
func (r result) throughput() float64 { return float64(r.samples) / r.wall.Seconds() }

// steadyThroughput is samples a second at the median step.
func (r result) steadyThroughput(batch int) float64 { return float64(batch) / r.median.Seconds() }

// run trains the CNN on this rank's shards of tr for cfg.epochs epochs and
// returns the accuracy on te (evaluated in shards, summed over the ranks).
func run(rt *hvd.Runtime, backend backends.Backend, cfg config, tr, te set) (result, error) {
	size := rt.Size()
	if cfg.batch%size != 0 {
		return result{}, fmt.Errorf("the global batch %d is not a multiple of the %d ranks", cfg.batch, size)
	}
	if cfg.plain && size != 1 {
		return result{}, errors.New("-plain trains without gorovod: run it with one process")
	}
	perRank := cfg.batch / size
	steps := tr.len() / size / perRank
	if steps == 0 {
		return result{}, fmt.Errorf("%d training examples make no batch of %d on each of %d ranks", tr.len(), perRank, size)
	}
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, int64(cfg.seed)+int64(rt.Rank())) // the broadcast makes them equal
	var opt optimizers.Interface = optimizers.Adam().LearningRate(cfg.lr).Done()
	var dopt *hvdgomlx.Optimizer
	if !cfg.plain {
		var err error
		if dopt, err = hvdgomlx.New(rt, backend, opt); err != nil {
			return result{}, err
		}
		opt = dopt
	}
	trainer := train.NewTrainer(backend, ctx, cnn, losses.SparseCategoricalCrossEntropyLogits, opt, nil, nil)
	loop := train.NewLoop(trainer)
	if dopt != nil {
		dopt.Attach(loop)
	}
	ds := &shardSet{s: tr, rank: rt.Rank(), size: size, perRank: perRank, steps: steps, seed: cfg.seed}
	start := time.Now()
	metrics, err := loop.RunEpochs(ds, cfg.epochs)
	if err != nil {
		return result{}, err
	}
	res := result{steps: steps * cfg.epochs, samples: steps * cfg.epochs * cfg.batch,
		wall: time.Since(start), median: loop.MedianTrainStepDuration()}
	res.loss = float64(tensors.ToScalar[float32](metrics[0]))
	res.accuracy, err = evaluate(rt, backend, trainer.Context(), te)
	return res, err
}

// shardSet is a train.Dataset of one rank's shard of a set: each epoch a
// new shuffle (hvd.ShuffledShard), steps full batches of perRank examples.
type shardSet struct {
	s                          set
	rank, size, perRank, steps int
	seed                       uint64
	epoch, step                int
	shard                      []int
}

func (d *shardSet) Name() string { return "fashion-mnist shard" }

// Reset starts the next epoch.
func (d *shardSet) Reset() { d.epoch, d.step, d.shard = d.epoch+1, 0, nil }

// Yield returns the next batch: images [perRank, 28, 28, 1] and labels [perRank, 1].
func (d *shardSet) Yield() (any, []*tensors.Tensor, []*tensors.Tensor, error) {
	if d.step >= d.steps {
		return nil, nil, nil, io.EOF
	}
	if d.shard == nil {
		d.shard = hvd.ShuffledShard(d.s.len(), d.size, d.rank, d.seed, d.epoch)
	}
	idx := hvd.Batch(d.shard, d.s.len()/d.size, d.perRank, d.step)
	d.step++
	x, y := tensorsOf(d.s, idx)
	return nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}, nil
}

// tensorsOf returns the images of idx scaled to [0, 1] and their labels.
func tensorsOf(s set, idx []int) (x, y *tensors.Tensor) {
	const px = side * side
	xs := make([]float32, len(idx)*px)
	ys := make([]int32, len(idx))
	for i, e := range idx {
		for p, b := range s.images[e*px : (e+1)*px] {
			xs[i*px+p] = float32(b) / 255
		}
		ys[i] = int32(s.labels[e])
	}
	return tensors.FromFlatDataAndDimensions(xs, len(idx), side, side, 1), tensors.FromFlatDataAndDimensions(ys, len(idx), 1)
}

// evalBatch is the batch of the evaluation.
const evalBatch = 500

// evaluate returns the accuracy on te: every rank predicts its shard
// (hvd.Shard) and one all-reduce sums the counts.
func evaluate(rt *hvd.Runtime, backend backends.Backend, ctx *context.Context, te set) (float64, error) {
	predict, err := context.NewExec(backend, ctx.Reuse(), func(ctx *context.Context, x *graph.Node) *graph.Node {
		return graph.ArgMax(cnn(ctx, nil, []*graph.Node{x})[0], -1, dtypes.Int32)
	})
	if err != nil {
		return 0, err
	}
	shard := hvd.Shard(te.len(), rt.Size(), rt.Rank())
	counts := []int64{0, int64(len(shard))}
	for lo := 0; lo < len(shard); lo += evalBatch {
		idx := shard[lo:min(lo+evalBatch, len(shard))]
		x, _ := tensorsOf(te, idx)
		out, err := predict.Exec(x)
		if err != nil {
			return 0, err
		}
		for i, p := range tensors.MustCopyFlatData[int32](out[0]) {
			if p == int32(te.labels[idx[i]]) {
				counts[0]++
			}
		}
	}
	if err := rt.Allreduce(stdctx.Background(), hvd.NewTensor("eval.counts", counts), kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return 0, err
	}
	if counts[1] == 0 {
		return 0, errors.New("no test examples")
	}
	return float64(counts[0]) / float64(counts[1]), nil
}
