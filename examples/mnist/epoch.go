package main

import (
	"context"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// epoch trains the rest of an epoch (all of it, unless resuming inside
// it), evaluates and checkpoints. It returns false when -max-steps stopped
// it early.
func (t *trainer) epoch(ctx context.Context, epoch int) (epochStats, bool, error) {
	shard := hvd.ShuffledShard(t.train.len(), t.rt.Size(), t.rt.Rank(), t.cfg.Seed, epoch)
	perRank := t.train.len() / t.rt.Size()
	start, samples := time.Now(), 0
	lossSum, lossN := 0.0, 0
	logEvery := t.cfg.LogEvery
	if logEvery <= 0 {
		logEvery = max(t.spe/10, 1)
	}
	for s := int(t.step) - epoch*t.spe; s < t.spe; s++ {
		if t.cfg.MaxSteps > 0 && t.step >= t.cfg.MaxSteps {
			return epochStats{}, false, nil
		}
		batch := hvd.Batch(shard, perRank, t.cfg.Batch, s)
		t.opt.SetLR(t.sched.At(hvd.Progress(epoch, s, t.spe)))
		loss, err := t.trainStep(ctx, batch)
		if err != nil {
			return epochStats{}, false, err
		}
		t.step++
		samples += len(batch) * t.rt.Size()
		lossSum, lossN = lossSum+loss, lossN+1
		// For gorun --metrics-dir: this rank's loss, the job's rate so far
		// this epoch, the learning rate (buffered; never blocks).
		t.rt.LogScalars(t.step, map[string]float64{"loss": loss, "lr": t.opt.LR(), "samples_per_second": float64(samples) / since(start)})
		if err := t.maybeSave(s+1 == t.spe); err != nil {
			return epochStats{}, false, err
		}
		if (s+1)%logEvery == 0 && s+1 < t.spe {
			if err := t.progress(ctx, epoch, s+1, lossSum/float64(lossN), float64(samples)/since(start)); err != nil {
				return epochStats{}, false, err
			}
		}
	}
	return t.endEpoch(ctx, epoch, lossSum/float64(max(lossN, 1)), samples, since(start))
}

// trainStep runs one batch forward and backward and updates the weights;
// each layer's gradients start their all-reduce as soon as the backward
// pass has left the layer.
func (t *trainer) trainStep(ctx context.Context, batch []int) (float64, error) {
	t.train.gather(batch, &t.x, t.labels)
	logits := t.m.forward(&t.x)
	loss, _, dlogits := t.m.loss(logits, t.labels[:len(batch)])
	if err := t.m.backward(dlogits, t.opt.GradReady); err != nil {
		return 0, err
	}
	return loss, t.opt.Step(ctx)
}

func (t *trainer) maybeSave(epochEnd bool) error {
	if every := int64(t.cfg.CkptEvery); epochEnd || every > 0 && t.step%every == 0 {
		return t.save()
	}
	return nil
}

// progress prints the loss since the start of the epoch, averaged over the
// ranks (every rank must call it at the same steps).
func (t *trainer) progress(ctx context.Context, epoch, step int, loss, rate float64) error {
	avg, err := hvd.AverageMetric(ctx, t.rt, "progress/loss", loss)
	if err != nil {
		return err
	}
	t.printf("epoch %d [%5d/%d] loss %.4f  lr %.4f  %6.0f samples/s\n", epoch+1, step, t.spe, avg, t.opt.LR(), rate)
	return nil
}

func (t *trainer) endEpoch(ctx context.Context, epoch int, loss float64, samples int, secs float64) (epochStats, bool, error) {
	avg, err := hvd.AverageMetric(ctx, t.rt, "epoch/loss", loss)
	if err != nil {
		return epochStats{}, false, err
	}
	acc, err := t.evaluate(ctx)
	if err != nil {
		return epochStats{}, false, err
	}
	st := epochStats{Epoch: epoch + 1, Loss: avg, Accuracy: acc, SamplesPerSec: float64(samples) / secs, Seconds: secs}
	t.rt.LogScalars(t.step, map[string]float64{"epoch_loss": avg, "test_accuracy": acc})
	t.printf("epoch %d: loss %.4f  test accuracy %.2f%%  %.0f samples/s (%.1f s)\n", st.Epoch, st.Loss, 100*st.Accuracy, st.SamplesPerSec, st.Seconds)
	return st, true, nil
}

// evaluate returns the accuracy on the whole test set, each rank
// classifying its own shard of it.
func (t *trainer) evaluate(ctx context.Context) (float64, error) {
	shard := hvd.Shard(t.test.len(), t.rt.Size(), t.rt.Rank())
	correct := 0
	labels := make([]uint8, 500)
	var x mat
	for lo := 0; lo < len(shard); lo += len(labels) {
		idx := shard[lo:min(lo+len(labels), len(shard))]
		t.test.gather(idx, &x, labels)
		_, c, _ := t.m.loss(t.m.forward(&x), labels[:len(idx)])
		correct += c
	}
	m, err := hvd.AverageMetrics(ctx, t.rt, map[string]float64{"correct": float64(correct), "n": float64(len(shard))})
	if err != nil {
		return 0, err
	}
	return m["correct"] / max(m["n"], 1), nil
}
