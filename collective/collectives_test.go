package collective_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// counts per rank for the v-collectives: uneven, with empty chunks.
func vcounts(n, base int) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = (i*base + 3) % (base + 2)
	}
	return c
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func offsets(counts []int) []int {
	o := make([]int, len(counts))
	for i := 1; i < len(counts); i++ {
		o[i] = o[i-1] + counts[i-1]
	}
	return o
}

func TestAllgatherv(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 64, InlineBytes: 256})
				for _, base := range []int{0, 1, 7, 300} {
					allgatherCase(t, cs, vcounts(n, base))
				}
			})
		}
	}
}

// TestReduceScatter: sizes 1..8 and 16 × even splits of several totals
// and uneven splits with empty chunks × every dtype × every op. Each
// rank's share is checked against the closed-form values, as in the
// all-reduce matrix.
func TestReduceScatter(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 64, InlineBytes: 256})
				for _, l := range scatterLayouts(n) {
					for _, dt := range kernels.DTypes {
						for _, op := range kernels.Ops {
							reduceScatterCase(t, cs, dt, op, l)
						}
					}
				}
			})
		}
	}
}

// scatterLayout is the split of a reduce-scatter: counts[i] elements for
// rank i. An even one (larger chunks first) goes in as nil counts, which
// must mean that split.
type scatterLayout struct {
	counts []int
	even   bool
}

// scatterLayouts are the splits TestReduceScatter tries for n ranks: even
// splits of 0, 1, n-1, n+1 and 1009 elements, and uneven ones, some with
// empty chunks (every even rank's, in the last).
func scatterLayouts(n int) []scatterLayout {
	var out []scatterLayout
	for _, total := range smallCounts(n) {
		even := make([]int, n)
		for i := range even {
			even[i] = total / n
			if i < total%n {
				even[i]++
			}
		}
		out = append(out, scatterLayout{even, true})
	}
	gaps := make([]int, n)
	for i := 1; i < n; i += 2 {
		gaps[i] = 3*i + 1
	}
	return append(out, scatterLayout{vcounts(n, 5), false}, scatterLayout{vcounts(n, 300), false}, scatterLayout{gaps, false})
}

// reduceScatterCase runs one reduce-scatter on every rank and checks each
// rank's share (see checkReduced).
func reduceScatterCase(t *testing.T, cs []*collective.Comm, dt kernels.DType, op kernels.Op, l scatterLayout) {
	t.Helper()
	n, total, off := len(cs), sum(l.counts), offsets(l.counts)
	arg := l.counts
	if l.even {
		arg = nil
	}
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = make([]byte, total*dt.Size())
		fillPeriodic(dt, bufs[r], func(i int) float64 { return input(op, r, i) })
	}
	meshtest.MustAll(t, onAll(t, cs, 60*time.Second, func(r int, c *collective.Comm) error {
		return c.ReduceScatter(context.Background(), dt, bufs[r], arg, op, collective.ReduceOptions{})
	}))
	exact := make([]byte, total*dt.Size())
	fillPeriodic(dt, exact, func(i int) float64 { return expected(dt, op, n, i) })
	sz := dt.Size()
	for r := range n {
		lo, hi := off[r]*sz, (off[r]+l.counts[r])*sz
		checkReduced(t, fmt.Sprintf("%v %v n=%d counts %v (even %t) rank %d", dt, op, n, l.counts, l.even, r),
			dt, op, n, bufs[r][lo:hi], exact[lo:hi], off[r])
	}
}

func TestBroadcastEveryRoot(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 1000, InlineBytes: 100})
				for root := range n {
					for _, count := range []int{0, 1, 99, 100_003} {
						broadcastCase(t, cs, root, count)
					}
				}
			})
		}
	}
}

func TestAlltoallv(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, tr.Make, n, collective.Options{})
				// rank r sends (r+p)%4 * scale elements to p.
				for _, scale := range []int{1, 5000} {
					cnt := func(from, to int) int { return (from + to) % 4 * scale }
					send, recv := make([][]int32, n), make([][]int32, n)
					sc, rc := make([][]int, n), make([][]int, n)
					for r := range n {
						sc[r], rc[r] = make([]int, n), make([]int, n)
						for p := range n {
							sc[r][p], rc[r][p] = cnt(r, p), cnt(p, r)
						}
						send[r], recv[r] = make([]int32, sum(sc[r])), make([]int32, sum(rc[r]))
						so := offsets(sc[r])
						for p := range n {
							for e := range sc[r][p] {
								send[r][so[p]+e] = int32(r<<20 | p<<12 | e%4096)
							}
						}
					}
					meshtest.MustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
						return collective.Alltoall(context.Background(), c, send[r], sc[r], recv[r], rc[r])
					}))
					for r := range n {
						ro := offsets(rc[r])
						for p := range n {
							for e := range rc[r][p] {
								if got, want := recv[r][ro[p]+e], int32(p<<20|r<<12|e%4096); got != want {
									t.Fatalf("rank %d from %d element %d = %x, want %x", r, p, e, got, want)
								}
							}
						}
					}
				}
			})
		}
	}
}

func TestBarrierWaitsForEveryRank(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			const n = 5
			cs := meshtest.Comms(t, tr.Make, n, collective.Options{})
			var entered [n]time.Time
			var left [n]time.Time
			meshtest.MustAll(t, onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
				time.Sleep(time.Duration(r) * 20 * time.Millisecond)
				entered[r] = time.Now()
				err := c.Barrier(context.Background())
				left[r] = time.Now()
				return err
			}))
			for r := range n {
				if left[r].Before(entered[n-1]) {
					t.Fatalf("rank %d left the barrier before rank %d entered it", r, n-1)
				}
			}
		})
	}
}

// TestScaleFactors: every rank multiplies its input by Prescale before the
// reduction and the result by Postscale after it (Average folding in
// 1/n), in an all-reduce and in each rank's share of a reduce-scatter.
// The ranks give different inputs, so a rank that skipped the reduction
// would show; with n = 4 every expected value is exact.
func TestScaleFactors(t *testing.T) {
	const n, count = 4, 10
	cases := []struct {
		op     kernels.Op
		o      collective.ReduceOptions
		factor float64 // the result is factor × the plain sum
	}{
		{kernels.Average, collective.ReduceOptions{Prescale: 3, Postscale: 0.5}, 3 * 0.5 / n},
		{kernels.Sum, collective.ReduceOptions{Prescale: 0.25}, 0.25},
		{kernels.Sum, collective.ReduceOptions{Postscale: 2}, 2},
		{kernels.Average, collective.ReduceOptions{}, 1.0 / n},
		{kernels.Sum, collective.ReduceOptions{}, 1},
	}
	// rank r gives (r+1)(i+1) at element i, so the plain sum is 10(i+1).
	in := func(r, i int) float64 { return float64((r + 1) * (i + 1)) }
	for _, tr := range meshtest.Kinds() {
		t.Run(tr.Name, func(t *testing.T) {
			cs := meshtest.Comms(t, tr.Make, n, collective.Options{})
			for _, tc := range cases {
				want := func(i int) float64 { return tc.factor * 10 * float64(i+1) }
				ar, rs := make([][]float64, n), make([][]float64, n)
				for r := range n {
					ar[r], rs[r] = make([]float64, count), make([]float64, count)
					for i := range count {
						ar[r][i], rs[r][i] = in(r, i), in(r, i)
					}
				}
				meshtest.MustAll(t, onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
					if err := collective.Allreduce(context.Background(), c, ar[r], tc.op, tc.o); err != nil {
						return err
					}
					return collective.ReduceScatter(context.Background(), c, rs[r], nil, tc.op, tc.o)
				}))
				for r := range n {
					for i, v := range ar[r] {
						if v != want(i) {
							t.Fatalf("%v %+v: all-reduce: rank %d element %d = %v, want %v", tc.op, tc.o, r, i, v, want(i))
						}
					}
					// even split of 10 over 4 ranks: 3, 3, 2, 2 elements.
					lo := []int{0, 3, 6, 8, 10}
					for i := lo[r]; i < lo[r+1]; i++ {
						if v := rs[r][i]; v != want(i) {
							t.Fatalf("%v %+v: reduce-scatter: rank %d element %d = %v, want %v", tc.op, tc.o, r, i, v, want(i))
						}
					}
				}
			}
		})
	}
}
