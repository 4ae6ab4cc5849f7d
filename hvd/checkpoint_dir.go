package hvd

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Checkpointer keeps a job's checkpoints in a directory, one file per
// saved step ("checkpoint-<step>.ckpt"). Rank 0 is its only writer.
type Checkpointer struct {
	// Dir holds the checkpoints; Save creates it.
	Dir string
	// Keep is how many of the newest checkpoints Save leaves; older ones
	// are removed. 0 keeps them all.
	Keep int
	// Logger reports skipped damaged checkpoints; nil means slog.Default().
	Logger *slog.Logger
}

// Path is the file of the checkpoint after step steps.
func (c *Checkpointer) Path(step int64) string {
	return filepath.Join(c.Dir, fmt.Sprintf("checkpoint-%012d.ckpt", step))
}

// Save writes ck atomically on rank 0 of rt (nil: the default runtime) and
// removes checkpoints beyond Keep and temporary files that a crashed save
// left behind. On other ranks it does nothing and returns nil; it is not
// collective.
func (c *Checkpointer) Save(rt *Runtime, ck *Checkpoint) error {
	rt, err := orDefault(rt)
	if err != nil {
		return err
	}
	if rt.Rank() != 0 {
		return nil
	}
	return c.Write(ck)
}

// Write writes ck atomically, whatever process calls it, and prunes as
// Save does: for a writer that is not a rank of an all-reduce job, such as
// the chief of a parameter-server job (package ps).
func (c *Checkpointer) Write(ck *Checkpoint) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("hvd: checkpoint directory: %w", err)
	}
	if err := WriteCheckpoint(c.Path(ck.Step), ck); err != nil {
		return err
	}
	return c.prune()
}

// list returns the checkpoint files of Dir, newest (highest step) first.
func (c *Checkpointer) list() ([]string, error) {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hvd: listing checkpoints: %w", err)
	}
	type file struct {
		step int64
		path string
	}
	var files []file
	for _, e := range entries {
		if step, ok := CheckpointStep(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{step, filepath.Join(c.Dir, e.Name())})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.step, a.step) })
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out, nil
}

// CheckpointStep returns the step that a checkpoint file's base name
// ("checkpoint-<step>.ckpt", as Path writes it) gives, and false for any
// other name (temporary files, foreign files). A reader that follows a
// Checkpointer's directory, such as package evaluator, uses it to know which
// files are checkpoints.
func CheckpointStep(name string) (step int64, ok bool) {
	s, ok := strings.CutPrefix(name, "checkpoint-")
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, ".ckpt"); !ok {
		return 0, false
	}
	step, err := strconv.ParseInt(s, 10, 64)
	return step, err == nil && step >= 0
}

// prune removes the checkpoints beyond Keep and leftover temporary files.
func (c *Checkpointer) prune() error {
	tmps, _ := filepath.Glob(filepath.Join(c.Dir, tmpPattern))
	for _, t := range tmps {
		os.Remove(t)
	}
	files, err := c.list()
	if err != nil || c.Keep <= 0 || len(files) <= c.Keep {
		return err
	}
	for _, f := range files[c.Keep:] {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hvd: removing an old checkpoint: %w", err)
		}
	}
	return nil
}
