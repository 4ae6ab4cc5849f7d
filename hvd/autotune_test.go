package hvd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestAutotuneLogFile: with autotuning on, rank 0 writes the CSV log named
// by the environment (a header, then a row per finished trial: the first
// ends after 3 warm-up and 10 measured steps) and closes it at Shutdown.
func TestAutotuneLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "autotune.csv")
	rts := hvdtest.Start(t, 2, hvdtest.WithConfig(func(cfg *hvd.Config) {
		cfg.Autotune, cfg.AutotuneLogPath = true, path
	}))
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		for range 20 {
			a, b := hvd.NewTensor("a", []float32{1, 2}), hvd.NewTensor("b", []float32{3})
			if err := rt.GroupedAllreduce(context.Background(), []*hvd.Tensor{a, b}, kernels.Sum, hvd.ReduceOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, rt := range rts {
		if err := rt.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 2 || lines[0] != "trial,fusion_bytes,cycle_ms,hierarchical,cache,bytes,seconds,bytes_per_s" ||
		!strings.HasPrefix(lines[1], "0,67108864,1,auto,on,") {
		t.Fatalf("autotune log:\n%s", data)
	}
}
