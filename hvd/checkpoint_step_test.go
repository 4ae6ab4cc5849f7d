package hvd_test

import (
	"path/filepath"
	"testing"

	"github.com/gorovod/gorovod/hvd"
)

func TestCheckpointStepReadsPathsNames(t *testing.T) {
	c := &hvd.Checkpointer{Dir: "/ckpt"}
	for _, step := range []int64{0, 7, 123456789012, 1 << 50} {
		if got, ok := hvd.CheckpointStep(filepath.Base(c.Path(step))); !ok || got != step {
			t.Errorf("CheckpointStep(%q) = %d, %v; want %d", filepath.Base(c.Path(step)), got, ok, step)
		}
	}
	for _, name := range []string{".checkpoint-123.tmp", "checkpoint-1.ckpt.bak", "checkpoint--1.ckpt", "checkpoint-x.ckpt", "ckpt-1.ckpt", "checkpoint-.ckpt"} {
		if step, ok := hvd.CheckpointStep(name); ok {
			t.Errorf("CheckpointStep(%q) = %d, true; want no checkpoint", name, step)
		}
	}
}
