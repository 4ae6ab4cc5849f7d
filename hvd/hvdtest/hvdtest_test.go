package hvdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sumRanks all-reduces every rank's rank and checks the sum.
func sumRanks(rt *hvd.Runtime) error {
	x := hvd.NewTensor("x", []int64{int64(rt.Rank())})
	if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return err
	}
	n := int64(rt.Size())
	if got := hvd.Values[int64](x)[0]; got != n*(n-1)/2 {
		return fmt.Errorf("sum of the ranks = %d, want %d", got, n*(n-1)/2)
	}
	return nil
}

func TestStartOverMemoryAndTCP(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []hvdtest.Option
	}{{"memory", nil}, {"tcp", []hvdtest.Option{hvdtest.OverTCP()}}} {
		t.Run(tc.name, func(t *testing.T) {
			rts := hvdtest.Start(t, 3, tc.opts...)
			for r, rt := range rts {
				if rt.Rank() != r || rt.Size() != 3 || rt.LocalRank() != r || rt.LocalSize() != 3 || rt.CrossSize() != 1 {
					t.Fatalf("runtime %d is rank %d of %d", r, rt.Rank(), rt.Size())
				}
			}
			hvdtest.Each(t, rts, sumRanks)
		})
	}
}

func TestWithConfig(t *testing.T) {
	rts := hvdtest.Start(t, 2, hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.CacheCapacity = 10 + cfg.Rank }))
	for r, rt := range rts {
		if got := rt.Env().CacheCapacity; got != 10+r {
			t.Errorf("rank %d: cache capacity %d, want %d", r, got, 10+r)
		}
	}
	hvdtest.Each(t, rts, sumRanks)
}

func TestRunNamesTheFailingRank(t *testing.T) {
	if err := hvdtest.Run(4, sumRanks); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	err := hvdtest.Run(3, func(rt *hvd.Runtime) error {
		if rt.Rank() == 2 {
			return errBoom
		}
		return nil
	})
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "rank 2: boom") || strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("err = %v, want rank 2's alone", err)
	}
	err = hvdtest.Run(2, sumRanks, hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.LogLevel = "loud" }))
	if err == nil || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "loud") {
		t.Fatalf("a bad log level: err = %v", err)
	}
}
