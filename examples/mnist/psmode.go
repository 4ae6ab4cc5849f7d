package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/ps"
)

// The -mode values.
const (
	modeAllReduce = "allreduce"
	modePS        = "ps"
	modeEvaluator = "evaluator"
)

// stepName is the one step function the chief schedules in ps mode.
const stepName = "train"

// trainPS is -mode ps, one process of a parameter-server job (gorun --ps N
// -np M, a TF_CONFIG with ps tasks, or srun with GOROVOD_PS_SERVERS): ps.Run
// gives this process its role. The chief creates the model's variables on
// the servers (split by ps.MinSizePartitioner(256 KiB, servers), as the
// seeds do), schedules one step per batch onto whichever worker is free,
// joins them at each progress line and epoch end, evaluates on the test
// set and writes the checkpoints; workers run the steps (pull the
// weights, one forward and backward pass over the step's batch, push the
// gradient, which the servers apply asynchronously with SGD + momentum or
// Adam); servers serve.
//
// A step names its batch (epoch and index into that epoch's permutation of
// the whole training set) rather than each worker reading a fixed shard:
// a step re-run on another worker after a worker died trains on the same
// samples, so every sample of an epoch is trained on exactly once however
// workers come and go.
func trainPS(ctx context.Context, cfg config, out io.Writer) error {
	w := &psWorker{cfg: cfg}
	if role, _ := hvd.Role(); role == "worker" {
		// Load the data before the chief schedules anything, not in the
		// first step (which the chief times).
		if err := w.init(); err != nil {
			return err
		}
	}
	wire := ps.WireFloat64
	if cfg.PSWire == "float32" {
		wire = ps.WireFloat32
	} else if cfg.PSWire != "float64" {
		return fmt.Errorf("unknown -ps-wire %q (want float64 or float32)", cfg.PSWire)
	}
	err := ps.Run(ctx, ps.Program{
		Wire:             wire,
		Steps:            map[string]ps.StepFunc{stepName: w.step},
		Chief:            func(ctx context.Context, c *ps.Chief) error { return runChief(ctx, c, cfg, out) },
		HeartbeatTimeout: cfg.Heartbeat,
		Staleness:        cfg.Staleness,
	})
	if err == nil && w.ran > 0 {
		// A worker's last line: how many steps this process ran (a step
		// re-run elsewhere after this worker was dropped counts in both).
		fmt.Fprintf(out, "worker %d ran %d steps\n", w.index, w.ran)
	}
	return err
}

// psStepsPerEpoch is the number of batches of cfg.Batch in an epoch of n
// training images, the last one possibly short.
func psStepsPerEpoch(cfg config, n int) int { return hvd.StepsPerEpoch(n, 1, cfg.Batch) }

// psFinalStep is the step count after every epoch (or -max-steps).
func psFinalStep(cfg config, n int) int64 {
	total := int64(cfg.Epochs * psStepsPerEpoch(cfg, n))
	if cfg.MaxSteps > 0 {
		total = min(total, cfg.MaxSteps)
	}
	return total
}

// stepArgs is what the chief sends with each step.
type stepArgs struct {
	Epoch, Index int     // the batch: Index-th of epoch Epoch's permutation
	LRScale      float64 // the learning-rate schedule's factor at this step
}

func (a stepArgs) encode() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b[0:], uint32(a.Epoch))
	binary.LittleEndian.PutUint32(b[4:], uint32(a.Index))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(a.LRScale))
	return b
}

func decodeStepArgs(b []byte) (stepArgs, error) {
	if len(b) != 16 {
		return stepArgs{}, fmt.Errorf("step arguments of %d bytes, want 16", len(b))
	}
	return stepArgs{
		Epoch:   int(binary.LittleEndian.Uint32(b[0:])),
		Index:   int(binary.LittleEndian.Uint32(b[4:])),
		LRScale: math.Float64frombits(binary.LittleEndian.Uint64(b[8:])),
	}, nil
}

// stepResult is what a step returns to the chief.
type stepResult struct {
	Loss      float64       // the batch's mean loss
	RoundTrip time.Duration // pull + push
}

func (r stepResult) encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(r.Loss))
	return binary.LittleEndian.AppendUint64(b, uint64(r.RoundTrip))
}

func decodeStepResult(b []byte) (stepResult, error) {
	if len(b) != 16 {
		return stepResult{}, fmt.Errorf("a step result of %d bytes, want 16", len(b))
	}
	return stepResult{Loss: math.Float64frombits(binary.LittleEndian.Uint64(b)), RoundTrip: time.Duration(binary.LittleEndian.Uint64(b[8:]))}, nil
}

// psWorker is a worker's state, built at its first step.
type psWorker struct {
	cfg   config
	once  sync.Once
	err   error
	train *dataset
	m     *model
	vals  map[string][]float64 // the model's own parameter slices: pulled into
	grads map[string][]float64 // the model's gradient slices: pushed from
	x     mat
	lbl   []uint8
	epoch int
	perm  []int
	index int // the worker's index, as its steps learn it
	ran   int // steps run to their end in this process
}

func (w *psWorker) init() error {
	w.once.Do(func() {
		if w.train, _, _, w.err = loadData(w.cfg.DataDir, w.cfg.SynthTrain, w.cfg.SynthTest, w.cfg.Seed); w.err != nil {
			return
		}
		if w.m, w.err = newModel(w.cfg.Model, w.cfg.Hidden, w.cfg.Seed); w.err != nil {
			return
		}
		// gorun gives each process its share of the host's processors
		// (GOMAXPROCS); the worker's matrix products take that many.
		th := w.cfg.Threads
		if th <= 0 {
			th = runtime.GOMAXPROCS(0)
		}
		setThreads(th)
		w.vals, w.grads = map[string][]float64{}, map[string][]float64{}
		for _, p := range w.m.params() {
			w.vals[p.Name], w.grads[p.Name] = p.Value, p.Grad
		}
		w.lbl, w.epoch = make([]uint8, w.cfg.Batch), -1
	})
	return w.err
}

// step trains one batch: pull, forward, backward, push. It returns the
// batch's loss and the time spent pulling and pushing.
func (w *psWorker) step(ctx context.Context, wc *ps.WorkerContext, args []byte) ([]byte, error) {
	if err := w.init(); err != nil {
		return nil, err
	}
	a, err := decodeStepArgs(args)
	if err != nil {
		return nil, err
	}
	if a.Epoch != w.epoch {
		w.perm, w.epoch = hvd.ShuffledShard(w.train.len(), 1, 0, w.cfg.Seed, a.Epoch), a.Epoch
	}
	batch := hvd.Batch(w.perm, len(w.perm), w.cfg.Batch, a.Index)
	if len(batch) == 0 {
		return nil, fmt.Errorf("step %d of epoch %d is past the epoch's %d images", a.Index, a.Epoch, len(w.perm))
	}
	t0 := time.Now()
	if _, err := wc.Client.Pull(ctx, w.vals); err != nil {
		return nil, err
	}
	pulled := time.Since(t0)
	w.train.gather(batch, &w.x, w.lbl)
	loss, _, dlogits := w.m.loss(w.m.forward(&w.x), w.lbl[:len(batch)])
	if err := w.m.backward(dlogits, nil); err != nil {
		return nil, err
	}
	// Weight decay joins the gradient here (the servers' optimizers have
	// none), and the schedule's factor scales it: with plain SGD that is
	// the schedule exactly; with momentum, new gradients enter the velocity
	// at the scaled rate.
	for _, p := range w.m.params() {
		for i, g := range p.Grad {
			p.Grad[i] = a.LRScale * (g + w.cfg.WeightDecay*p.Value[i])
		}
	}
	t1 := time.Now()
	if err := wc.Client.Push(ctx, w.grads); err != nil {
		return nil, err
	}
	rtt := pulled + time.Since(t1)
	w.index = wc.Index
	w.ran++
	return stepResult{Loss: loss, RoundTrip: rtt}.encode(), nil
}

// chief drives a ps-mode run.
type chief struct {
	c     *ps.Chief
	cfg   config
	out   io.Writer
	m     *model
	train *dataset
	test  *dataset
	ckpt  *hvd.Checkpointer
	sched hvd.LRSchedule
	spe   int
	step  int64
	vals  map[string][]float64
	rtts  []time.Duration // every step's pull + push
	done  int64           // steps whose result came back in this run
}

func runChief(ctx context.Context, c *ps.Chief, cfg config, out io.Writer) error {
	ch := &chief{c: c, cfg: cfg, out: out}
	var note string
	var err error
	if ch.train, ch.test, note, err = loadData(cfg.DataDir, cfg.SynthTrain, cfg.SynthTest, cfg.Seed); err != nil {
		return err
	}
	ch.printf("%s\n", note)
	if ch.m, err = newModel(cfg.Model, cfg.Hidden, cfg.Seed); err != nil {
		return err
	}
	opt := ps.Optimizer{Kind: cfg.Optimizer, LR: cfg.LR}
	if cfg.Optimizer == "sgd" {
		opt.Momentum = cfg.Momentum
	}
	part, err := ps.MinSizePartitioner(256<<10, c.Servers())
	if err != nil {
		return err
	}
	if err := c.Client.Create(ctx, psVariables(ch.m), part, opt); err != nil {
		return err
	}
	ch.spe = psStepsPerEpoch(cfg, ch.train.len())
	// The schedule of one worker's rate: no warm-up to a larger job's
	// rate (each push is one worker's batch), the same milestones.
	ch.sched = hvd.LRSchedule{Base: cfg.LR, Size: 1, Milestones: cfg.Milestones, Gamma: cfg.Gamma}
	if cfg.CkptDir != "" {
		ch.ckpt = &hvd.Checkpointer{Dir: cfg.CkptDir, Keep: cfg.Keep}
		if cfg.Resume {
			if err := ch.resume(ctx); err != nil {
				return err
			}
		}
	}
	n := 0
	for _, p := range ch.m.params() {
		n += len(p.Value)
	}
	ch.printf("%s model, %d parameters on %d parameter servers, %d workers × batch %d, %d steps per epoch, %s (lr %g) on the servers, asynchronous\n",
		cfg.Model, n, c.Servers(), c.Workers(), cfg.Batch, ch.spe, cfg.Optimizer, cfg.LR)
	var acc float64
	for epoch := int(ch.step) / ch.spe; epoch < cfg.Epochs; epoch++ {
		done, a, err := ch.epoch(ctx, epoch)
		if err != nil {
			return err
		}
		acc = a
		if !done {
			ch.report()
			ch.printf("stopped after step %d (-max-steps)\n", ch.step)
			return nil
		}
	}
	ch.report()
	ch.printf("final test accuracy %.2f%% after %d epochs on %d worker(s) and %d parameter server(s)\n", 100*acc, cfg.Epochs, c.Workers(), c.Servers())
	return nil
}

// report prints the steps done and the pull + push round trips.
func (ch *chief) report() {
	if len(ch.rtts) == 0 {
		return
	}
	slices.Sort(ch.rtts)
	q := func(f float64) time.Duration { return ch.rtts[min(len(ch.rtts)-1, int(f*float64(len(ch.rtts))))] }
	ch.printf("%d steps done in this run, each result taken once; pull+push round trip median %v, p99 %v\n",
		ch.done, q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond))
}

// epoch schedules the epoch's steps left, in chunks that end at each
// progress line and checkpoint, and evaluates at its end.
func (ch *chief) epoch(ctx context.Context, epoch int) (bool, float64, error) {
	logEvery := ch.cfg.LogEvery
	if logEvery <= 0 {
		logEvery = max(ch.spe/10, 1)
	}
	start, samples := time.Now(), 0
	lossSum, lossN := 0.0, 0
	for s := int(ch.step) - epoch*ch.spe; s < ch.spe; {
		end := min(ch.spe, (s/logEvery+1)*logEvery)
		if every := ch.cfg.CkptEvery; every > 0 {
			end = min(end, int((ch.step/int64(every)+1)*int64(every))-epoch*ch.spe)
		}
		if ch.cfg.MaxSteps > 0 {
			end = min(end, int(ch.cfg.MaxSteps)-epoch*ch.spe)
		}
		if end <= s {
			return false, 0, nil
		}
		rvs := make([]*ps.RemoteValue, 0, end-s)
		for i := s; i < end; i++ {
			scale := ch.sched.At(hvd.Progress(epoch, i, ch.spe)) / ch.cfg.LR
			rvs = append(rvs, ch.c.Schedule(stepName, stepArgs{Epoch: epoch, Index: i, LRScale: scale}.encode()))
		}
		for i, rv := range rvs {
			b, err := rv.Wait(ctx)
			if err != nil {
				return false, 0, fmt.Errorf("step %d of epoch %d: %w", s+i, epoch+1, err)
			}
			r, err := decodeStepResult(b)
			if err != nil {
				return false, 0, fmt.Errorf("step %d of epoch %d: %w", s+i, epoch+1, err)
			}
			lossSum += r.Loss
			ch.c.LogScalars(ch.step+int64(i+1), map[string]float64{"loss": r.Loss}) // to gorun's --metrics-dir and dashboard
			ch.rtts = append(ch.rtts, r.RoundTrip)
			ch.done++
			lossN++
			samples += batchLen(ch.train.len(), ch.cfg.Batch, s+i)
		}
		ch.step += int64(end - s)
		s = end
		if s < ch.spe && s%logEvery == 0 {
			ch.printf("epoch %d [%5d/%d] loss %.4f  lr %.4f  %6.0f samples/s\n", epoch+1, s, ch.spe, lossSum/float64(lossN),
				ch.sched.At(hvd.Progress(epoch, s, ch.spe)), float64(samples)/since(start))
		}
		if err := ch.maybeSave(s == ch.spe); err != nil {
			return false, 0, err
		}
	}
	secs := since(start)
	if err := ch.pull(ctx); err != nil {
		return false, 0, err
	}
	_, acc := testScore(ch.m, ch.test)
	ch.printf("epoch %d: loss %.4f  test accuracy %.2f%%  %.0f samples/s (%.1f s)\n", epoch+1, lossSum/float64(max(lossN, 1)), 100*acc, float64(samples)/secs, secs)
	ch.c.LogScalars(ch.step, map[string]float64{"epoch_loss": lossSum / float64(max(lossN, 1)), "test_accuracy": acc,
		"samples_per_second": float64(samples) / secs})
	return true, acc, nil
}

// pull copies the servers' values into the chief's model.
func (ch *chief) pull(ctx context.Context) error {
	if ch.vals == nil {
		ch.vals = map[string][]float64{}
		for _, p := range ch.m.params() {
			ch.vals[p.Name] = p.Value
		}
	}
	_, err := ch.c.Client.Pull(ctx, ch.vals)
	return err
}

func (ch *chief) maybeSave(epochEnd bool) error {
	every := int64(ch.cfg.CkptEvery)
	if ch.ckpt == nil || !(epochEnd || every > 0 && ch.step%every == 0) {
		return nil
	}
	if err := ch.pull(context.Background()); err != nil {
		return err
	}
	ck := &hvd.Checkpoint{Epoch: int(ch.step) / ch.spe, Step: ch.step, Params: map[string][]float64{}, Seed: ch.cfg.Seed,
		Meta: map[string]string{"model": ch.cfg.Model, "mode": modePS, "steps_per_epoch": strconv.Itoa(ch.spe)}}
	for name, v := range ch.vals {
		ck.Params[name] = append([]float64(nil), v...)
	}
	return ch.ckpt.Write(ck)
}

// resume loads the newest valid checkpoint onto the servers.
func (ch *chief) resume(ctx context.Context) error {
	ck, path, err := ch.ckpt.Latest()
	if err != nil {
		return err
	}
	if ck == nil {
		ch.printf("no checkpoint to resume from in %s\n", ch.cfg.CkptDir)
		return nil
	}
	if ck.Meta["mode"] != modePS || ck.Meta["steps_per_epoch"] != strconv.Itoa(ch.spe) {
		return fmt.Errorf("%s was written by -mode %q with %s steps per epoch, this run is -mode ps with %d: resume with the same mode and -batch",
			path, ck.Meta["mode"], ck.Meta["steps_per_epoch"], ch.spe)
	}
	if err := setParams(ch.m, ck.Params); err != nil {
		return err
	}
	if err := ch.c.Client.Load(ctx, ck.Params, ck.Step); err != nil {
		return err
	}
	ch.step = ck.Step
	ch.printf("resumed from step %d (epoch %d, step %d of it)\n", ck.Step, ck.Epoch+1, int(ck.Step)%ch.spe)
	return nil
}

func (ch *chief) printf(format string, args ...any) {
	if ch.out != nil {
		fmt.Fprintf(ch.out, format, args...)
	}
}

// psVariables are m's parameters as the servers' variables: a dense
// layer's weights keep their in×out shape (row blocks of input rows), the
// rest are vectors.
func psVariables(m *model) []ps.Variable {
	var vars []ps.Variable
	for _, l := range m.layers {
		for _, p := range l.params() {
			shape := []int{len(p.Value)}
			if d, ok := l.(*dense); ok && p == d.w {
				shape = []int{d.in, d.out}
			}
			vars = append(vars, ps.Variable{Name: p.Name, Shape: shape, Value: append([]float64(nil), p.Value...)})
		}
	}
	return vars
}

// batchLen is the size of the index-th batch of size items of n.
func batchLen(n, size, index int) int {
	lo := min(index*size, n)
	return min(lo+size, n) - lo
}
