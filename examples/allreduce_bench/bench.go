package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// config is what the sweep measures and how.
type config struct {
	sizes      []int // bytes per rank
	dtype      kernels.DType
	op         kernels.Op
	warmup     int     // max warm-up calls per size (0: by size, as the peers do)
	iters      int     // max samples per size (0: by size)
	budget     float64 // seconds of samples per size (soft; never fewer than 3)
	warmBudget float64 // seconds of warm-up per size (soft; at least 1 call)
	csv        bool
	label      string
	via        string // comm or hvd (see job)
	parts      int    // with comm: tensors per fused all-reduce (see commJob)
}

// plan returns warm-up calls, max samples and calls per sample for a size,
// the same table as peers/mpi_allreduce.c's, so that figures
// are comparable.
func plan(nbytes int) (warm, iters, k int) {
	switch {
	case nbytes <= 16<<10:
		return 200, 200, 20
	case nbytes <= 256<<10:
		return 50, 100, 5
	case nbytes <= 4<<20:
		return 10, 50, 1
	case nbytes <= 32<<20:
		return 3, 20, 1
	case nbytes <= 128<<20:
		return 2, 10, 1
	}
	return 1, 5, 1
}

// result is the measurement of one size, as rank 0 reports it.
type result struct {
	bytes, count, samples, k int
	median, min, mean        float64 // seconds per all-reduce
	wrong                    int64
}

// sweep runs every size on every rank; rank 0 prints the results to out.
func sweep(ctx context.Context, c job, cfg config, out io.Writer) error {
	if c.rank() == 0 {
		header(out, cfg, c.size())
	}
	for _, nbytes := range cfg.sizes {
		res, err := measure(ctx, c, cfg, nbytes)
		if err != nil {
			return fmt.Errorf("size %d: %w", nbytes, err)
		}
		if c.rank() == 0 {
			report(out, cfg, c.size(), res)
		}
	}
	if err := c.barrier(ctx); err != nil {
		return err
	}
	if c.rank() == 0 && cfg.csv {
		fmt.Fprintln(out, "# done")
	}
	return nil
}

// proceed lets rank 0 decide for everyone whether to go on.
func proceed(ctx context.Context, c job, local bool) (bool, error) { return c.proceed(ctx, local) }

func measure(ctx context.Context, c job, cfg config, nbytes int) (result, error) {
	esz := cfg.dtype.Size()
	count := nbytes / esz
	buf := make([]byte, count*esz)
	warm, iters, k := plan(nbytes)
	if cfg.warmup > 0 {
		warm = cfg.warmup
	}
	if cfg.iters > 0 {
		iters = cfg.iters
	}
	refill := func() { fillConst(cfg.dtype, buf, float64(c.rank()+1)) }
	allreduce := func() error { return c.allreduce(ctx, cfg.dtype, buf, cfg.op) }
	start := time.Now()
	for w := 0; ; w++ {
		more := w < warm && (w < 1 || time.Since(start).Seconds() < cfg.warmBudget)
		if ok, err := proceed(ctx, c, more); err != nil || !ok {
			if err != nil {
				return result{}, err
			}
			break
		}
		if w%10 == 0 {
			refill() // keep values finite: in-place sums grow n-fold per call
		}
		if err := allreduce(); err != nil {
			return result{}, err
		}
	}
	var samples []float64
	start = time.Now()
	for {
		more := len(samples) < iters && (len(samples) < 3 || time.Since(start).Seconds() < cfg.budget)
		if ok, err := proceed(ctx, c, more); err != nil || !ok {
			if err != nil {
				return result{}, err
			}
			break
		}
		refill()
		if err := c.barrier(ctx); err != nil {
			return result{}, err
		}
		t0 := time.Now()
		for range k {
			if err := allreduce(); err != nil {
				return result{}, err
			}
		}
		samples = append(samples, time.Since(t0).Seconds()/float64(k))
	}
	// Per sample, the slowest rank counts.
	if err := c.maxOf(ctx, samples); err != nil {
		return result{}, err
	}
	wrong, err := verify(ctx, c, cfg, buf)
	if err != nil {
		return result{}, err
	}
	return summarize(nbytes, count, k, samples, wrong), nil
}

// verify runs one all-reduce of rank+1 everywhere and counts, over all
// ranks, the elements that differ from the closed-form result.
func verify(ctx context.Context, c job, cfg config, buf []byte) (int64, error) {
	fillConst(cfg.dtype, buf, float64(c.rank()+1))
	if err := c.allreduce(ctx, cfg.dtype, buf, cfg.op); err != nil {
		return 0, err
	}
	want := expect(cfg.dtype, cfg.op, c.size())
	bad := []int64{int64(countWrong(cfg.dtype, buf, want))}
	err := c.sumOf(ctx, bad)
	return bad[0], err
}

// expect is the result of reducing the values 1..n with op.
func expect(dt kernels.DType, op kernels.Op, n int) float64 {
	switch op {
	case kernels.Min:
		return 1
	case kernels.Max:
		return float64(n)
	case kernels.Prod:
		p := 1.0
		for i := 2; i <= n; i++ {
			p *= float64(i)
		}
		return p
	case kernels.Average:
		if !dt.IsFloat() {
			return math.RoundToEven(float64(n+1) / 2)
		}
		return float64(n+1) / 2
	}
	return float64(n * (n + 1) / 2)
}

func summarize(nbytes, count, k int, samples []float64, wrong int64) result {
	s := slices.Clone(samples)
	slices.Sort(s)
	m := len(s)
	med := s[m/2]
	if m%2 == 0 {
		med = (s[m/2-1] + s[m/2]) / 2
	}
	total := 0.0
	for _, v := range s {
		total += v
	}
	return result{bytes: nbytes, count: count, samples: m, k: k, median: med, min: s[0], mean: total / float64(m), wrong: wrong}
}
