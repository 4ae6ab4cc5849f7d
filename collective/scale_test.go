package collective_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

// scaleRanks is the job size of TestScale256.
const scaleRanks = 256

// scaleLimit bounds each operation of TestScale256 on all ranks; it only
// catches a hang (a healthy run takes a small fraction of it, even under
// the race detector on 2 CPUs with other packages' tests beside it).
const scaleLimit = 5 * time.Minute

// TestScale256 forms a job of 256 in-process ranks over the memory
// transport with the default options and runs every collective a training
// job uses, each checked on every rank against closed-form values:
// all-reduce (sum, float32 and float64: an odd count and 4 KiB, which run
// inline by recursive doubling, and an odd count of about 256 KiB, which
// runs the pipelined ring), all-gather with uneven counts (inline,
// pipelined, with empty chunks), broadcast from a root other than 0
// (inline and pipelined), barrier, and the negotiation's Agree (Min with
// a summed float32 tail).
//
// The ranks' per-element work is kept small rather than the ranks few:
// inputs are a shared pattern copied into each buffer plus one
// rank-specific element in every 256 (see scaleInput), and results are
// compared with bytes.Equal, so the race detector, which slows element
// loops in Go about 20×, mostly sees memory moves.
func TestScale256(t *testing.T) {
	cs := scaleComms(t, scaleRanks)
	t.Run("allreduce/f32", func(t *testing.T) {
		for _, count := range []int{1000, 1024, 65537} { // odd, 4 KiB, ~256 KiB odd
			scaleAllreduce[float32](t, cs, count)
		}
	})
	t.Run("allreduce/f64", func(t *testing.T) {
		for _, count := range []int{1000, 512, 32771} { // odd, 4 KiB, ~256 KiB odd
			scaleAllreduce[float64](t, cs, count)
		}
	})
	t.Run("allgather", func(t *testing.T) {
		scaleAllgather(t, cs, func(r int) int { return 1 + r*7%5 })  // ~6 KiB: inline
		scaleAllgather(t, cs, func(r int) int { return 64 + r%3 })   // ~130 KiB: pipelined
		scaleAllgather(t, cs, func(r int) int { return r % 4 * 50 }) // with empty chunks
	})
	t.Run("broadcast", func(t *testing.T) {
		scaleBroadcast(t, cs, 37, 1001)              // inline
		scaleBroadcast(t, cs, scaleRanks-1, 300<<10) // pipelined
	})
	t.Run("barrier", func(t *testing.T) {
		for range 3 {
			scaleBarrier(t, cs)
		}
	})
	t.Run("agree", func(t *testing.T) {
		scaleAgree(t, cs)
	})
	for r, c := range cs { // both executors ran, as the sizes intend
		if inline, pipelined := collective.Runs(c); inline == 0 || pipelined == 0 {
			t.Errorf("rank %d ran %d operations inline and %d pipelined, want some of each", r, inline, pipelined)
		}
	}
}

// scaleComms forms a memory mesh of n ranks with a default Comm on each,
// closed at cleanup.
func scaleComms(t testing.TB, n int) []*collective.Comm {
	t.Helper()
	net := memtransport.NewNetwork(n)
	cs := make([]*collective.Comm, n)
	for r, tr := range net.Transports() {
		cs[r] = collective.NewComm(tr, collective.Options{})
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// scaleOnAll runs f on every rank at once and fails t with the first
// rank's error, or if the ranks do not all return within scaleLimit.
func scaleOnAll(t *testing.T, cs []*collective.Comm, what string, f func(r int, c *collective.Comm) error) {
	t.Helper()
	errs := make(chan error, len(cs))
	ctx, cancel := context.WithTimeout(context.Background(), scaleLimit)
	defer cancel()
	for r, c := range cs {
		go func() {
			if err := f(r, c); err != nil {
				errs <- fmt.Errorf("rank %d: %w", r, err)
				return
			}
			errs <- nil
		}()
	}
	var first error
	for range cs {
		select {
		case err := <-errs:
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			for _, c := range cs { // unblock the ranks still waiting
				c.Abort(fmt.Errorf("%s: %w", what, ctx.Err()))
			}
			t.Fatalf("%s: ranks did not return within %v", what, scaleLimit)
		}
	}
	if first != nil {
		t.Fatalf("%s: %v", what, first)
	}
}

// scalePattern is the part of every rank's input that all ranks share:
// pseudo-random small positive integers, so that a segment reduced or
// copied to the wrong place shows, and every partial sum over up to 256
// ranks is an integer below 2^24, exact in float32 in any order.
func scalePattern(i int) int { return 1 + int(uint32(i)*2654435761>>20)%1024 }

// scaleInput fills buf with rank r's input of n ranks: the shared pattern,
// plus r+1 at the elements i with i%n == r. The sum at element i is
// therefore n·pattern(i) + i%n + 1: each element holds a part only one
// rank gives, and n parts every rank gives.
func scaleInput[T float32 | float64](buf, pattern []T, r, n int) {
	copy(buf, pattern)
	for i := r; i < len(buf); i += n {
		buf[i] += T(r + 1)
	}
}

func scaleAllreduce[T float32 | float64](t *testing.T, cs []*collective.Comm, count int) {
	t.Helper()
	n := len(cs)
	pattern, want := make([]T, count), make([]T, count)
	for i := range pattern {
		pattern[i] = T(scalePattern(i))
		want[i] = T(n*scalePattern(i) + i%n + 1)
	}
	bufs := make([][]T, n)
	for r := range bufs {
		bufs[r] = make([]T, count)
		scaleInput(bufs[r], pattern, r, n)
	}
	what := fmt.Sprintf("allreduce of %d %v", count, kernels.DTypeOf[T]())
	scaleOnAll(t, cs, what, func(r int, c *collective.Comm) error {
		return collective.Allreduce(context.Background(), c, bufs[r], kernels.Sum, collective.ReduceOptions{})
	})
	exact := kernels.AsBytes(want)
	for r, b := range bufs {
		if !bytes.Equal(kernels.AsBytes(b), exact) {
			t.Fatalf("%s: rank %d: %s", what, r, scaleFirstDiff(b, want))
		}
	}
}

// scaleFirstDiff describes the first element where got and want differ.
func scaleFirstDiff[T comparable](got, want []T) string {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Sprintf("element %d = %v, want %v", i, got[i], want[i])
		}
	}
	return "no difference"
}

// scaleAllgather gathers counts(r) float64 from each rank r: element j of
// rank r's chunk is r·1000 + j.
func scaleAllgather(t *testing.T, cs []*collective.Comm, count func(r int) int) {
	t.Helper()
	n := len(cs)
	counts, offs := make([]int, n), make([]int, n+1)
	for r := range n {
		counts[r] = count(r)
		offs[r+1] = offs[r] + counts[r]
	}
	want := make([]float64, offs[n])
	for r := range n {
		for j := range counts[r] {
			want[offs[r]+j] = float64(r*1000 + j)
		}
	}
	bufs := make([][]float64, n)
	for r := range bufs {
		bufs[r] = make([]float64, offs[n])
		copy(bufs[r][offs[r]:offs[r+1]], want[offs[r]:offs[r+1]])
	}
	what := fmt.Sprintf("allgather of %d float64", offs[n])
	scaleOnAll(t, cs, what, func(r int, c *collective.Comm) error {
		return collective.Allgather(context.Background(), c, bufs[r], counts)
	})
	for r, b := range bufs {
		if !bytes.Equal(kernels.AsBytes(b), kernels.AsBytes(want)) {
			t.Fatalf("%s: rank %d: %s", what, r, scaleFirstDiff(b, want))
		}
	}
}

// scaleBroadcast broadcasts size bytes from root; other ranks start with
// a buffer of another content.
func scaleBroadcast(t *testing.T, cs []*collective.Comm, root, size int) {
	t.Helper()
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(scalePattern(i + root))
	}
	bufs := make([][]byte, len(cs))
	for r := range bufs {
		bufs[r] = bytes.Repeat([]byte{byte(r)}, size)
	}
	copy(bufs[root], want)
	what := fmt.Sprintf("broadcast of %d bytes from rank %d", size, root)
	scaleOnAll(t, cs, what, func(r int, c *collective.Comm) error {
		return c.Broadcast(context.Background(), bufs[r], root)
	})
	for r, b := range bufs {
		if !bytes.Equal(b, want) {
			t.Fatalf("%s: rank %d: %s", what, r, scaleFirstDiff(b, want))
		}
	}
}

// scaleBarrier checks that no rank leaves the barrier before every rank
// entered it.
func scaleBarrier(t *testing.T, cs []*collective.Comm) {
	t.Helper()
	var entered atomic.Int64
	early := make([]int64, len(cs)) // ranks seen entered on leaving, if fewer than all
	scaleOnAll(t, cs, "barrier", func(r int, c *collective.Comm) error {
		entered.Add(1)
		if err := c.Barrier(context.Background()); err != nil {
			return err
		}
		if got := entered.Load(); got != int64(len(cs)) {
			early[r] = got
		}
		return nil
	})
	for r, got := range early {
		if got != 0 {
			t.Fatalf("rank %d left the barrier when %d of %d ranks had entered", r, got, len(cs))
		}
	}
}

// scaleAgree runs the negotiation's exchange: a Min over a byte section,
// the answer section, and a float32 tail summed as the engine's early
// all-reduce does. Byte j of rank r is 10 + (r·37 + j·11) mod 200; float j
// of rank r is (r+1)(j+1).
func scaleAgree(t *testing.T, cs []*collective.Comm) {
	t.Helper()
	n := len(cs)
	const data, floats = 64, 16
	answers := data
	tail := (answers + n + 7) &^ 7
	size := tail + 4*floats
	sum, err := kernels.Lookup(kernels.F32, kernels.Sum)
	if err != nil {
		t.Fatal(err)
	}
	byteOf := func(r, j int) byte { return byte(10 + (r*37+j*11)%200) }
	want := make([]byte, size)
	for j := range data {
		want[j] = 255
		for r := range n {
			want[j] = min(want[j], byteOf(r, j))
		}
	}
	for r := range n {
		want[answers+r] = collective.AnswerOK
	}
	wantTail := kernels.FromBytes[float32](want[tail:])
	for j := range wantTail {
		wantTail[j] = float32((j + 1) * n * (n + 1) / 2)
	}
	vs := make([][]byte, n)
	for r := range vs {
		v := make([]byte, size)
		for j := range data {
			v[j] = byteOf(r, j)
		}
		for p := range n {
			v[answers+p] = collective.AnswerOK
		}
		for j, f := 0, kernels.FromBytes[float32](v[tail:]); j < floats; j++ {
			f[j] = float32((r + 1) * (j + 1))
		}
		vs[r] = v
	}
	opts := collective.AgreeOptions{Op: "scale-agree", Answers: answers, Limit: time.Minute, Rider: collective.AgreeRider{Reduce: sum, At: tail}}
	scaleOnAll(t, cs, "agree", func(r int, c *collective.Comm) error {
		return c.Agree(context.Background(), vs[r], opts)
	})
	for r, v := range vs {
		if !bytes.Equal(v, want) {
			t.Fatalf("agree: rank %d: %s", r, scaleFirstDiff(v, want))
		}
	}
}
