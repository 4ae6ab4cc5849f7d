package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestMismatchedNamesEndAtOpTimeout: rank 0 all-reduces "a" and rank 1
// "b", each blocking without a deadline, with OpTimeout 1 s and no stall
// shutdown time. Both calls return within 20 s with the stall's error
// (ErrStall and ErrTimeout), naming each tensor, the rank that submitted
// it and the rank that did not.
func TestMismatchedNamesEndAtOpTimeout(t *testing.T) {
	rts := hvdtest.Start(t, 2, hvdtest.WithConfig(func(cfg *hvd.Config) {
		cfg.OpTimeout, cfg.StallShutdown = time.Second, 0
	}))
	errs := make(chan error, len(rts))
	for r, rt := range rts {
		go func() {
			name := []string{"a", "b"}[r]
			err := rt.Allreduce(context.Background(), hvd.NewTensor(name, []float32{1}), kernels.Sum, hvd.ReduceOptions{})
			switch {
			case !errors.Is(err, engine.ErrStall) || !errors.Is(err, collective.ErrTimeout):
				err = fmt.Errorf("rank %d: %v, want ErrStall and ErrTimeout", r, err)
			case !strings.Contains(err.Error(), "a (submitted by rank 0)") || !strings.Contains(err.Error(), "b (submitted by rank 1)") ||
				!strings.Contains(err.Error(), "missing ranks: rank 0: [b]; rank 1: [a]"):
				err = fmt.Errorf("rank %d: %v does not name the tensors and ranks", r, err)
			default:
				err = nil
			}
			errs <- err
		}()
	}
	timeout := time.After(20 * time.Second)
	for range rts {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-timeout:
			t.Fatal("the all-reduces did not return within 20s")
		}
	}
}
