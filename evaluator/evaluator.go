package evaluator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/metricpush"
)

// DefaultPoll is how often Run looks at the directory when Options.Poll is
// 0.
const DefaultPoll = time.Second

// Options configure Run.
type Options struct {
	// Dir is the checkpoint directory (a Checkpointer's Dir). It need not
	// exist yet.
	Dir string
	// Eval evaluates one checkpoint and returns its metrics. Its ctx is
	// Run's; an error ends Run with that error, unless ctx has ended.
	Eval func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error)
	// Out receives one JSON line (a Result) per evaluation, in one Write
	// each; nil writes nothing.
	Out io.Writer
	// Poll is how often Dir is listed while no new checkpoint is waiting;
	// 0 means DefaultPoll.
	Poll time.Duration
	// FinalStep ends Run after it has evaluated a checkpoint at this step
	// or a later one; 0 means no final step.
	FinalStep int64
	// MaxEvaluations ends Run after this many evaluations; 0 means no
	// limit.
	MaxEvaluations int
	// Logger reports evaluations (INFO), skipped files (WARN, or INFO for
	// a pruned one); nil means slog.Default().
	Logger *slog.Logger

	// scanned, when set (by tests), is called after each listing of Dir.
	scanned func()
}

// Stop says why Run ended without an error.
type Stop string

// The reasons Run ends without an error.
const (
	// StopCanceled: Run's ctx ended (a signal, a deadline).
	StopCanceled Stop = "canceled"
	// StopFinalStep: a checkpoint at or past Options.FinalStep was evaluated.
	StopFinalStep Stop = "final step"
	// StopMaxEvaluations: Options.MaxEvaluations checkpoints were evaluated.
	StopMaxEvaluations Stop = "max evaluations"
)

// Summary is what Run did.
type Summary struct {
	// Evaluations counts the checkpoints evaluated.
	Evaluations int
	// Last is the last evaluation; nil when there was none.
	Last *Result
	// Skipped counts checkpoint files passed over: each damaged version
	// of a file once, each file removed between the listing and the read
	// once, and each distinct error of an unreadable file once.
	Skipped int
	// Stopped says why Run ended; empty when it returned an error.
	Stopped Stop
}

// Run follows Dir and evaluates every checkpoint that appears in it once,
// lowest step first, until ctx ends (a nil error and StopCanceled), a
// checkpoint at or past FinalStep has been evaluated, or MaxEvaluations
// have been. It returns an error only for bad Options, an Eval error or an
// Out write error. See the package documentation for the details.
func Run(ctx context.Context, o Options) (Summary, error) {
	switch {
	case o.Dir == "":
		return Summary{}, errors.New("evaluator: Options.Dir is empty")
	case o.Eval == nil:
		return Summary{}, errors.New("evaluator: Options.Eval is nil")
	case o.Poll < 0 || o.FinalStep < 0 || o.MaxEvaluations < 0:
		return Summary{}, fmt.Errorf("evaluator: negative Poll (%v), FinalStep (%d) or MaxEvaluations (%d)", o.Poll, o.FinalStep, o.MaxEvaluations)
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	r := &run{o: o, log: o.Logger, done: make(map[int64]bool), bad: make(map[string]badFile)}
	if r.log == nil {
		r.log = slog.Default()
	}
	var closeMetrics func()
	r.pub, closeMetrics = gorunMetrics(ctx, r.log) // under gorun --evaluator with metrics (metrics.go)
	defer closeMetrics()
	return r.loop(ctx)
}

// run is the state of one Run.
type run struct {
	o    Options
	log  *slog.Logger
	done map[int64]bool     // the steps evaluated
	bad  map[string]badFile // files by name that failed to read, while listed
	sum  Summary
	pub  *metricpush.Pusher // gorun's metrics; nil without

	missing bool   // Dir did not exist at the last listing (logged once)
	listErr string // the last error listing Dir (logged once)
}

// badFile is a checkpoint file that could not be read: damaged (fi is the
// damaged version, passed over until the file changes) or unreadable for
// another reason (fi nil: retried at each listing, logged when err changes).
type badFile struct {
	fi  os.FileInfo
	err string
}

// candidate is a checkpoint file not yet evaluated.
type candidate struct {
	step int64
	name string
}

func (r *run) loop(ctx context.Context) (Summary, error) {
	for {
		if ctx.Err() != nil {
			r.sum.Stopped = StopCanceled
			return r.sum, nil
		}
		cands := r.list()
		if r.o.scanned != nil {
			r.o.scanned()
		}
		evaluated, err := r.next(ctx, cands)
		if err != nil {
			return r.sum, err
		}
		if evaluated {
			if stop := r.reached(); stop != "" {
				r.sum.Stopped = stop
				return r.sum, nil
			}
			continue // list again at once: what appeared meanwhile comes next
		}
		t := time.NewTimer(r.o.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// reached is why Run should end after the last evaluation, if it should.
func (r *run) reached() Stop {
	switch {
	case r.o.FinalStep > 0 && r.sum.Last.Step >= r.o.FinalStep:
		return StopFinalStep
	case r.o.MaxEvaluations > 0 && r.sum.Evaluations >= r.o.MaxEvaluations:
		return StopMaxEvaluations
	}
	return ""
}

// list returns the checkpoint files of Dir whose steps are not evaluated
// yet, lowest step first. Other files are ignored; Dir is read in batches,
// so memory follows the number of pending checkpoints, not of files.
func (r *run) list() []candidate {
	f, err := os.Open(r.o.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		if !r.missing {
			r.log.Info("evaluator: waiting for the checkpoint directory", "dir", r.o.Dir)
			r.missing = true
		}
		return nil
	}
	r.missing = false
	if err != nil {
		r.listFailed(err)
		return nil
	}
	defer f.Close()
	var cands []candidate
	complete := true
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if step, ok := hvd.CheckpointStep(e.Name()); ok && e.Type().IsRegular() && !r.done[step] {
				cands = append(cands, candidate{step, e.Name()})
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			r.listFailed(err)
			complete = false
		}
		if err != nil {
			break
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.name, b.name))
	})
	if !complete { // the error stays logged once; bad files not listed may still be there
		return cands
	}
	r.listErr = ""
	if len(r.bad) > 0 { // forget the bad files that are gone or whose step is evaluated
		listed := make(map[string]bool, len(cands))
		for _, c := range cands {
			listed[c.name] = true
		}
		for name := range r.bad {
			if !listed[name] {
				delete(r.bad, name)
			}
		}
	}
	return cands
}

func (r *run) listFailed(err error) {
	if msg := err.Error(); msg != r.listErr {
		r.log.Warn("evaluator: cannot list the checkpoint directory; retrying", "dir", r.o.Dir, "err", err)
		r.listErr = msg
	}
}

// next evaluates the first candidate that reads whole and reports whether
// it evaluated one. An evaluation that ctx interrupted is no evaluation.
func (r *run) next(ctx context.Context, cands []candidate) (bool, error) {
	for _, c := range cands {
		if ctx.Err() != nil {
			return false, nil
		}
		path := filepath.Join(r.o.Dir, c.name)
		fi, err := os.Stat(path)
		if err != nil {
			r.unreadable(c, nil, err)
			continue
		}
		if b, ok := r.bad[c.name]; ok && b.fi != nil && sameVersion(b.fi, fi) {
			continue // still the damaged version
		}
		ck, err := hvd.ReadCheckpoint(path)
		if err != nil {
			r.unreadable(c, fi, err)
			continue
		}
		delete(r.bad, c.name)
		return r.evaluate(ctx, c, ck)
	}
	return false, nil
}

// unreadable logs and counts a checkpoint file that could not be read; fi
// is the version that was read, or nil when even its Stat failed.
func (r *run) unreadable(c candidate, fi os.FileInfo, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.log.Info("evaluator: a checkpoint was removed before it was evaluated (pruned? a larger Checkpointer.Keep keeps it longer)", "step", c.step, "file", c.name)
	case errors.Is(err, hvd.ErrBadCheckpoint) && fi != nil:
		r.log.Warn("evaluator: skipping a damaged checkpoint until it is rewritten", "step", c.step, "file", c.name, "err", err)
		r.bad[c.name] = badFile{fi: fi}
	default:
		if r.bad[c.name].err == err.Error() {
			return
		}
		r.log.Warn("evaluator: cannot read a checkpoint; retrying", "step", c.step, "file", c.name, "err", err)
		r.bad[c.name] = badFile{err: err.Error()}
	}
	r.sum.Skipped++
}

// sameVersion reports whether a and b describe the same, unchanged file:
// the same inode, size and modification time. A rewrite through
// hvd.WriteCheckpoint (a rename) is a new inode; a copy that grows in place
// changes the size.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// evaluate runs Eval on ck and writes its Result.
func (r *run) evaluate(ctx context.Context, c candidate, ck *hvd.Checkpoint) (bool, error) {
	if ck.Step != c.step {
		r.log.Warn("evaluator: a checkpoint's step differs from its file name's; the name's counts", "file", c.name, "checkpoint_step", ck.Step)
	}
	start := time.Now()
	m, err := r.o.Eval(ctx, ck)
	if err != nil {
		if ctx.Err() != nil {
			r.log.Info("evaluator: an evaluation was interrupted", "step", c.step, "err", err)
			return false, nil
		}
		return false, fmt.Errorf("evaluator: evaluating the checkpoint of step %d (%s): %w", c.step, c.name, err)
	}
	if m == nil {
		m = map[string]float64{}
	}
	res := &Result{Step: c.step, Epoch: ck.Epoch, Metrics: Metrics(m), Time: time.Now().UTC(), Seconds: time.Since(start).Seconds(), File: c.name}
	r.done[c.step] = true
	r.sum.Evaluations++
	r.sum.Last = res
	r.log.Info("evaluator: evaluated a checkpoint", "step", c.step, "epoch", ck.Epoch, "metrics", m, "seconds", res.Seconds)
	publish(r.pub, res)
	if r.o.Out != nil {
		line, err := json.Marshal(res)
		if err != nil {
			return true, fmt.Errorf("evaluator: encoding the result of step %d: %w", c.step, err)
		}
		if _, err := r.o.Out.Write(append(line, '\n')); err != nil {
			return true, fmt.Errorf("evaluator: writing the result of step %d: %w", c.step, err)
		}
	}
	return true, nil
}
