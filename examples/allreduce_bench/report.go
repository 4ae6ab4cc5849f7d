package main

import (
	"fmt"
	"io"
)

// busFactor converts algorithm bandwidth to bus bandwidth for a ring
// all-reduce (nccl-tests convention): every rank sends and receives
// 2(n-1)/n of the buffer.
func busFactor(n int) float64 { return 2 * float64(n-1) / float64(n) }

func header(out io.Writer, cfg config, n int) {
	fmt.Fprintf(out, "# gorovod allreduce_bench: %d ranks, %v %v, in place, max over ranks, median over samples\n", n, cfg.dtype, cfg.op)
	if !cfg.csv {
		fmt.Fprintf(out, "%12s %12s %9s %6s %11s %12s %12s %7s\n", "size(B)", "count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong")
	}
}

func report(out io.Writer, cfg config, n int, r result) {
	algbw := float64(r.bytes) / r.median / 1e9
	busbw := algbw * busFactor(n)
	if cfg.csv {
		ok := "ok"
		if r.wrong != 0 {
			ok = "FAIL"
		}
		fmt.Fprintf(out, "RESULT,%s,%d,%d,%d,%d,%.9f,%.9f,%.9f,%.4f,%.4f,%s\n",
			cfg.label, n, r.bytes, r.samples, r.k, r.median, r.min, r.mean, algbw, busbw, ok)
		return
	}
	fmt.Fprintf(out, "%12d %12d %9v %6v %11.2f %12.4f %12.4f %7d\n",
		r.bytes, r.count, cfg.dtype, cfg.op, r.median*1e6, algbw, busbw, r.wrong)
}
