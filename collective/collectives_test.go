package collective_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
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
	for _, tr := range transports {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				cs := newComms(t, tr.mk, n, collective.Options{SegmentBytes: 64, InlineBytes: 256})
				for _, base := range []int{0, 1, 7, 300} {
					counts := vcounts(n, base)
					off, total := offsets(counts), sum(counts)
					bufs := make([][]int64, n)
					for r := range bufs {
						bufs[r] = make([]int64, total)
						for e := range counts[r] {
							bufs[r][off[r]+e] = int64(r*1_000_000 + e)
						}
					}
					mustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
						return collective.Allgather(context.Background(), c, bufs[r], counts)
					}))
					for r := range bufs {
						for c := range n {
							for e := range counts[c] {
								if got := bufs[r][off[c]+e]; got != int64(c*1_000_000+e) {
									t.Fatalf("counts %v: rank %d element %d of chunk %d = %d", counts, r, e, c, got)
								}
							}
						}
					}
				}
			})
		}
	}
}

func TestReduceScatter(t *testing.T) {
	for _, tr := range transports {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				cs := newComms(t, tr.mk, n, collective.Options{SegmentBytes: 64, InlineBytes: 256})
				for _, counts := range [][]int{nil, vcounts(n, 5), vcounts(n, 1000)} {
					total := 4099
					if counts != nil {
						total = sum(counts)
					}
					bufs := make([][]float32, n)
					for r := range bufs {
						bufs[r] = make([]float32, total)
						for i := range bufs[r] {
							bufs[r][i] = float32(r + 1 + i%5)
						}
					}
					mustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
						return collective.ReduceScatter(context.Background(), c, bufs[r], counts, kernels.Average, collective.ReduceOptions{})
					}))
					own := counts
					if own == nil {
						own = make([]int, n)
						for i := range own {
							own[i] = total / n
							if i < total%n {
								own[i]++
							}
						}
					}
					off := offsets(own)
					for r := range n {
						for e := off[r]; e < off[r]+own[r]; e++ {
							want := float32(float64(n*(n+1)/2+n*(e%5)) / float64(n))
							if got := bufs[r][e]; got != want && (got-want)/want > 1e-6 {
								t.Fatalf("counts %v rank %d element %d = %v, want %v", counts, r, e, got, want)
							}
						}
					}
				}
			})
		}
	}
}

func TestBroadcastEveryRoot(t *testing.T) {
	for _, tr := range transports {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				cs := newComms(t, tr.mk, n, collective.Options{SegmentBytes: 1000, InlineBytes: 100})
				for root := range n {
					for _, count := range []int{0, 1, 99, 100_003} {
						bufs := make([][]uint8, n)
						for r := range bufs {
							bufs[r] = make([]uint8, count)
							if r == root {
								for i := range bufs[r] {
									bufs[r][i] = uint8(i*31 + root)
								}
							}
						}
						mustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
							return collective.Broadcast(context.Background(), c, bufs[r], root)
						}))
						for r := range bufs {
							for i, v := range bufs[r] {
								if v != uint8(i*31+root) {
									t.Fatalf("root %d count %d: rank %d byte %d = %d", root, count, r, i, v)
								}
							}
						}
					}
				}
			})
		}
	}
}

func TestAlltoallv(t *testing.T) {
	for _, tr := range transports {
		for _, n := range commSizes {
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				cs := newComms(t, tr.mk, n, collective.Options{})
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
					mustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
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
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			const n = 5
			cs := newComms(t, tr.mk, n, collective.Options{})
			var entered [n]time.Time
			var left [n]time.Time
			mustAll(t, onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
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

func TestScaleFactors(t *testing.T) {
	cs := newComms(t, memMesh, 4, collective.Options{})
	bufs := make([][]float64, 4)
	for r := range bufs {
		bufs[r] = []float64{1, 2, 3}
	}
	mustAll(t, onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
		return collective.Allreduce(context.Background(), c, bufs[r], kernels.Average, collective.ReduceOptions{Prescale: 3, Postscale: 0.5})
	}))
	// mean of 3x is 3x, times 0.5.
	for r := range bufs {
		for i, v := range bufs[r] {
			if want := float64(i+1) * 3 * 0.5; v != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, v, want)
			}
		}
	}
}
