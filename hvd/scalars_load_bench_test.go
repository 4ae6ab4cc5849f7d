package hvd_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// BenchmarkLogScalarsInSteps is the cost of LogScalars in a training
// loop, sender and receiver together: 4 ranks of an in-process job run
// steps of a little computing and an all-reduce of 256 Ki float32, and
// their points go through a real rendezvous server into gorun's
// metrics.Store: "receiver=store" as gorun --dashboard has it,
// "receiver=store+jsonl" writing metrics.jsonl too, as --metrics-dir;
// with "receiver=none" the server takes no points, so that the ranks
// drop and count them (the calls' own cost).
//
// The steps go in blocks of about a second, each after a gap of about
// 0.4 s that is not measured (longer than ScalarInterval, so that the
// points of a block are sent and received before the next block starts;
// the lines of metrics.jsonl are written by the Writer's goroutine, at
// most metrics.LineBudget a second, in every block alike while any wait,
// so their cost is in neither block of a pair), and the blocks in groups
// of 4: an "on" and an "off" block (in
// one order in even groups, the other in odd ones), where "on" calls
// LogScalars (4 scalars a call) about 10,000 times a second on every rank
// (2,500 in the last case, 10,000 over the job; after each step, the
// calls that the time in "on" steps so far owes) and "off" does not; then
// two "off" blocks, a control pair measured the
// same way. b.N is the number of groups (at least 6).
//
// Per block, rank 0 takes the wall time per step and the process's CPU
// time (every rank, the server, the Store and the file) per step. It
// reports the medians of "on" and "off" blocks (on-ns/step,
// off-ns/step); over the pairs, the median of the difference of a pair's
// two blocks relative to its "off" block in wall time (overhead-%) and in
// CPU time (cpu-overhead-%: on a machine whose CPUs the job keeps busy,
// as the 4 ranks keep 2, extra CPU is extra step time; CPU time is far
// less disturbed by other load than wall time); the same two for the
// control pairs (off/off-%, cpu-off/off-%: the noise); the calls per
// second the "on" blocks made on rank 0; and the points dropped.
func BenchmarkLogScalarsInSteps(b *testing.B) {
	for _, c := range []struct {
		recv string
		rate int
	}{{"none", 10_000}, {"store", 10_000}, {"store+jsonl", 10_000}, {"store+jsonl", 2_500}} {
		b.Run(fmt.Sprintf("receiver=%s/calls=%d", c.recv, c.rate), func(b *testing.B) { logScalarsInSteps(b, c.recv, c.rate) })
	}
}

// logScalarsInSteps is BenchmarkLogScalarsInSteps with the receiver recv
// and rate calls a second on each rank in "on" blocks.
func logScalarsInSteps(b *testing.B, recv string, rate int) {
	const (
		n       = 4
		group   = 4       // blocks per group: an on/off pair, then an off/off pair
		elems   = 1 << 18 // all-reduced float32 per step
		compute = 1 << 16 // float64 multiply-adds per step
		blockT  = time.Second
		gapT    = 400 * time.Millisecond
	)
	st := receiverStore(b, recv)
	var onMetrics func(int, []rendezvous.MetricPoint) // "none": the server takes no points, the ranks drop and count them
	if st != nil {
		onMetrics = st.AddRankPoints // as gorun's
	}
	rts, _ := metricsJob(b, n, onMetrics)
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
	type block struct{ wall, cpu time.Duration } // per step
	var blocks []block                           // rank 0's
	var calls atomic.Int64                       // rank 0's
	var onTime time.Duration
	// run runs blocks of blockSteps steps, each after gapSteps steps (no
	// blocks: steps steps, unmeasured).
	run := func(nblocks, blockSteps, gapSteps int) {
		period := gapSteps + blockSteps
		steps := nblocks * period
		each(b, rts, func(r int, rt *hvd.Runtime) error {
			x := make([]float32, elems)
			var made int64
			var logged time.Duration // time in "on" steps so far
			var t0 time.Time
			var c0 time.Duration
			for i := range steps {
				k, pos := i/period, i%period
				inBlock := pos >= gapSteps
				logging := inBlock && on(k)
				if r == 0 && pos == gapSteps {
					t0, c0 = time.Now(), cpuTime()
				}
				s0 := time.Now()
				if err := step(rt, x); err != nil {
					return err
				}
				if logging {
					// The calls owed at rate for the time in "on" steps,
					// this one included.
					for d := time.Since(s0); made < int64((logged+d).Seconds()*float64(rate)); made++ {
						rt.LogScalars(int64(i), scalars)
					}
					logged += time.Since(s0) // the step and the calls
				}
				if r == 0 && pos == period-1 && blockSteps > 0 {
					wall := time.Since(t0)
					blocks = append(blocks, block{wall / time.Duration(blockSteps), (cpuTime() - c0) / time.Duration(blockSteps)})
					if logging {
						onTime += wall
					}
				}
			}
			if r == 0 {
				calls.Store(made)
			}
			return nil
		})
	}
	// Warm-up (connections, buffers), then the step time sets the plan.
	start := time.Now()
	run(1, 0, 200)
	stepT := time.Since(start) / 200
	blockSteps, gapSteps := max(16, int(blockT/stepT)), max(8, int(gapT/stepT))
	groups := max(6, b.N)
	b.ResetTimer()
	run(groups*group, blockSteps, gapSteps)
	b.StopTimer()
	for _, rt := range rts {
		if err := rt.Shutdown(); err != nil {
			b.Fatal(err)
		}
	}
	var onBlocks, offBlocks []time.Duration
	var pairs, control, cpuPairs, cpuControl []float64
	rel := func(x, y time.Duration) float64 { return float64(x-y) / float64(y) }
	for g := 0; g+group <= len(blocks); g += group {
		a, c := blocks[g], blocks[g+1] // the on/off pair, "on" first in even groups
		if !on(g) {
			a, c = c, a
		}
		onBlocks, offBlocks = append(onBlocks, a.wall), append(offBlocks, c.wall, blocks[g+2].wall, blocks[g+3].wall)
		pairs, cpuPairs = append(pairs, rel(a.wall, c.wall)), append(cpuPairs, rel(a.cpu, c.cpu))
		x, y := blocks[g+2], blocks[g+3] // the control pair, in the order of the other
		if !on(g) {
			x, y = y, x
		}
		control, cpuControl = append(control, rel(x.wall, y.wall)), append(cpuControl, rel(x.cpu, y.cpu))
	}
	if len(pairs) < 2 {
		b.Fatalf("%d blocks: too few for pairs", len(blocks))
	}
	b.ReportMetric(float64(median(offBlocks).Nanoseconds()), "off-ns/step")
	b.ReportMetric(float64(median(onBlocks).Nanoseconds()), "on-ns/step")
	b.ReportMetric(100*medianFloat(pairs), "overhead-%")
	b.ReportMetric(100*medianFloat(control), "off/off-%")
	b.ReportMetric(100*medianFloat(cpuPairs), "cpu-overhead-%")
	b.ReportMetric(100*medianFloat(cpuControl), "cpu-off/off-%")
	b.ReportMetric(float64(len(pairs)), "pairs")
	b.ReportMetric(float64(calls.Load())/onTime.Seconds(), "calls/s")
	var dropped int64
	for _, rt := range rts {
		dropped += rt.DroppedScalars()
	}
	b.ReportMetric(float64(dropped), "dropped")
	if want := 4 * calls.Load(); st != nil && st.Accepted() < want {
		b.Fatalf("the store took %d points; rank 0 alone logged %d", st.Accepted(), want)
	}
}

// receiverStore is the gorun Store that a benchmark's receiver recv feeds,
// closed when b ends: none for "count" and "none", one for "store", and
// one that writes metrics.jsonl in a temporary directory for
// "store+jsonl".
func receiverStore(b *testing.B, recv string) *metrics.Store {
	var cfg metrics.Config
	switch recv {
	case "store":
	case "store+jsonl":
		w, err := metrics.NewWriter(filepath.Join(b.TempDir(), "metrics.jsonl"), 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Out = w
	default:
		return nil
	}
	st := metrics.NewStore(cfg)
	b.Cleanup(func() { st.Close() })
	return st
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
// 4 scalars, from the call to the points taken by what receives them
// (the buffer, the sending goroutine, packing, the connection, unpacking,
// and the receiver, which also counts them), in CPU time
// of the process (cpu-ns/call) as well as wall time: rank 0 of a 2-rank
// in-process job calls it b.N times at full speed, then waits until every
// point has arrived. The receiver is the rendezvous server's OnMetrics,
// as gorun's: "count" only counts the points; "store" is gorun's
// metrics.Store (as with --dashboard); "store+jsonl" is a Store that
// writes metrics.jsonl too (as with --metrics-dir), whose lines are
// written after the timing (BenchmarkWriterPoints' lines-ns/point: while
// gorun runs, its Writer spends at most metrics.LineBudget on them). At
// 10,000 calls a second, a rank and gorun spend 10,000 × cpu-ns/call of
// CPU a second on its scalars.
func BenchmarkLogScalarsEndToEnd(b *testing.B) {
	for _, recv := range []string{"count", "store", "store+jsonl"} {
		b.Run("receiver="+recv, func(b *testing.B) {
			var received atomic.Int64
			st := receiverStore(b, recv)
			rts, _ := metricsJob(b, 2, func(rank int, points []rendezvous.MetricPoint) {
				if st != nil {
					st.AddRankPoints(rank, points) // as gorun's
				}
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
				if i%256 == 255 { // at most scalarLag points (and 256 calls) in flight, as a rank that logs 10,000 calls a second has
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
			if d := rt.DroppedScalars(); d != 0 {
				b.Fatalf("%d points dropped: the cost is not that of points received", d)
			}
			for _, rt := range rts {
				rt.Shutdown()
			}
		})
	}
}

// scalarLag is how many points BenchmarkLogScalarsEndToEnd lets wait for
// a send: as many as the sender keeps before it sends early (three
// quarters of its buffer), so that the buffer never overflows.
const scalarLag = hvd.ScalarBuffer * 3 / 4

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
