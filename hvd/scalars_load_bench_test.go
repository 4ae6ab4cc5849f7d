package hvd_test

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// BenchmarkLogScalarsInSteps is the cost of LogScalars in a training
// loop: 4 ranks of an in-process job, whose metrics go through a real
// rendezvous server, run steps of a little computing and an all-reduce
// of 256 Ki float32. The steps go in blocks of 16, and the blocks in
// groups of 4: two blocks that make a pair "on" and "off" (in one order
// in even groups, the other in odd ones), in which "on" calls LogScalars
// (4 scalars a call) about 10,000 times a second on every rank (after
// each step, the calls that the time in "on" steps so far owes) and "off"
// does not; then two "off" blocks, a control pair measured the same way
// (the first against the second in even groups, the other way round in
// odd ones).
// It reports the median step time of "on" and "off" blocks
// (on-ns/step, off-ns/step); the median over the pairs of the difference
// of a pair's two blocks relative to its "off" block, in percent
// (overhead-%: neighbours share the load of a loaded machine, and the
// alternating order cancels its drift); the same for the control pairs
// (off/off-%, the noise that is left, whose spread says how far to
// trust overhead-%); the calls per second the "on" blocks made on rank
// 0; and the points dropped. The points are sent every ScalarInterval
// whatever the block, so part of the cost of sending and receiving them
// lands in blocks without calls and cancels out of the pairs: overhead-%
// is the calls' cost and what of the rest fell in their own block.
func BenchmarkLogScalarsInSteps(b *testing.B) {
	const (
		n       = 4
		block   = 16      // steps per block
		group   = 4       // blocks per group: an on/off pair, then an off/off pair
		rate    = 10_000  // LogScalars calls per second per rank, in "on" blocks
		elems   = 1 << 18 // all-reduced float32 per step
		compute = 1 << 16 // float64 multiply-adds per step
	)
	var received atomic.Int64
	rts, _ := metricsJob(b, n, func(_ int, points []rendezvous.MetricPoint) { received.Add(int64(len(points))) })
	ctx := context.Background()
	scalars := map[string]float64{"loss": 0.5, "accuracy": 0.9, "lr": 0.01, "samples_per_second": 1e4}
	work := make([][]float64, n)
	for r := range work {
		work[r] = make([]float64, compute)
	}
	step := func(rt *hvd.Runtime, x []float32) error {
		w := work[rt.Rank()]
		acc := 1.0
		for i := range w {
			acc = math.FMA(acc, 0.999999, w[i]+1e-9)
			w[i] = acc
		}
		return rt.Allreduce(ctx, hvd.NewTensor("grad", x), kernels.Average, hvd.ReduceOptions{})
	}
	// on says whether block k logs: the first of the group's pair in even
	// groups, the second in odd ones; never the control pair.
	on := func(k int) bool {
		pos, g := k%group, k/group
		return pos < 2 && pos == g%2
	}
	var calls atomic.Int64     // rank 0's
	var blocks []time.Duration // rank 0's step time in each block
	var onTime time.Duration
	run := func(steps int, measure bool) {
		each(b, rts, func(r int, rt *hvd.Runtime) error {
			x := make([]float32, elems)
			var stepNo, made int64
			var logged time.Duration // time in "on" steps so far
			blockStart := time.Now()
			for i := range steps {
				logging := measure && on(i/block)
				t0 := time.Now()
				if err := step(rt, x); err != nil {
					return err
				}
				if logging {
					// The calls owed at rate for the time in "on" steps,
					// this one included.
					d := time.Since(t0)
					for ; made < int64((logged+d).Seconds()*rate); made++ {
						rt.LogScalars(stepNo, scalars)
					}
					logged += time.Since(t0) // the step and the calls
				}
				stepNo++
				if r != 0 || (i+1)%block != 0 {
					continue
				}
				d := time.Since(blockStart) / block
				blockStart = time.Now()
				if measure {
					blocks = append(blocks, d)
					if logging {
						onTime += d * block
					}
				}
			}
			if r == 0 {
				calls.Store(made)
			}
			return nil
		})
	}
	run(2*block, false) // warm-up: connections, buffers, the step time
	steps := max(b.N, 2*group*block)
	steps -= steps % (group * block) // whole groups
	b.ResetTimer()
	run(steps, true)
	b.StopTimer()
	for _, rt := range rts {
		if err := rt.Shutdown(); err != nil {
			b.Fatal(err)
		}
	}
	var onBlocks, offBlocks []time.Duration
	var pairs, control []float64
	for g := 0; g+group <= len(blocks); g += group {
		a, c := blocks[g], blocks[g+1] // the on/off pair, "on" first in even groups
		if !on(g) {
			a, c = c, a
		}
		onBlocks, offBlocks = append(onBlocks, a), append(offBlocks, c, blocks[g+2], blocks[g+3])
		pairs = append(pairs, float64(a-c)/float64(c))
		x, y := blocks[g+2], blocks[g+3] // the control pair, in the order of the other
		if !on(g) {
			x, y = y, x
		}
		control = append(control, float64(x-y)/float64(y))
	}
	if len(pairs) < 2 {
		b.Fatalf("%d blocks: too few for pairs", len(blocks))
	}
	b.ReportMetric(float64(median(offBlocks).Nanoseconds()), "off-ns/step")
	b.ReportMetric(float64(median(onBlocks).Nanoseconds()), "on-ns/step")
	b.ReportMetric(100*medianFloat(pairs), "overhead-%")
	b.ReportMetric(100*medianFloat(control), "off/off-%")
	b.ReportMetric(float64(len(pairs)), "pairs")
	b.ReportMetric(float64(calls.Load())/onTime.Seconds(), "calls/s")
	var dropped int64
	for _, rt := range rts {
		dropped += rt.DroppedScalars()
	}
	b.ReportMetric(float64(dropped), "dropped")
	if received.Load() == 0 {
		b.Fatal("no point reached the server")
	}
}

// medianFloat is the median of xs (the mean of the middle two of an even
// count).
func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// median is the median of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLogScalarsEndToEnd is the whole cost of one LogScalars call of
// 4 scalars, from the call to the points handed to the rendezvous
// server's OnMetrics (the buffer, the sending goroutine, packing, the
// connection, unpacking), in CPU time of the process (cpu-ns/call) as
// well as wall time: rank 0 of a 2-rank in-process job calls it b.N times
// at full speed, then waits until every point has arrived. At 10,000
// calls a second, a rank spends 10,000 × cpu-ns/call of CPU a second on
// its scalars, sender and receiver together.
func BenchmarkLogScalarsEndToEnd(b *testing.B) {
	var received atomic.Int64
	rts, _ := metricsJob(b, 2, func(_ int, points []rendezvous.MetricPoint) {
		n := 0
		for _, p := range points {
			if !p.Runtime {
				n++
			}
		}
		received.Add(int64(n))
	})
	scalars := map[string]float64{"loss": 0.5, "accuracy": 0.9, "lr": 0.01, "samples_per_second": 1e4}
	rt := rts[0]
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		rt.LogScalars(int64(i), scalars)
		if i%1024 == 1023 { // at most a buffer's worth in flight, as a rank that logs 10,000 calls a second has
			for received.Load()+rt.DroppedScalars() < int64(4*(i+1)-scalarLag) {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	for received.Load()+rt.DroppedScalars() < int64(4*b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/call")
	b.ReportMetric(float64(rt.DroppedScalars()), "dropped")
	for _, rt := range rts {
		rt.Shutdown()
	}
}

// scalarLag is how many points BenchmarkLogScalarsEndToEnd lets wait for a send.
const scalarLag = 4 * 1024

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
