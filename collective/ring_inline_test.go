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

// TestRingInlineWhenLinksHoldTheLead: a ring all-reduce among more than
// two ranks, too large for the rule of TestInlineWhenLinksBuffer, runs
// inline exactly when every link holds (n-1)s+1 of its largest messages,
// s being the messages a chunk goes in (see Comm.ringBuffers), and gives
// the same result either way.
func TestRingInlineWhenLinksHoldTheLead(t *testing.T) {
	const mib, hdr = 1 << 20, 24
	for _, c := range []struct {
		n, count, segment int // float32 elements; segment in bytes, 0: default (1 MiB)
		lead, msg         int // the rule's messages and their largest size
	}{
		{3, 3 * mib / 4, 0, 3, mib},           // chunks of one 1 MiB message
		{4, mib, 0, 4, mib},                   // the same among four
		{3, 3 * mib / 4, mib / 2, 5, mib / 2}, // chunks of two 512 KiB messages
		{5, 5*mib/4 - 3, 0, 5, mib},           // uneven chunks: the largest counts
	} {
		for _, capacity := range []int{c.lead*(c.msg+hdr) - 1, c.lead * (c.msg + hdr)} {
			inline := capacity == c.lead*(c.msg+hdr)
			t.Run(fmt.Sprintf("n%d/count%d/segment%d/inline=%v", c.n, c.count, c.segment, inline), func(t *testing.T) {
				cs := make([]*collective.Comm, c.n)
				for r, tr := range meshtest.Mem(t, c.n) {
					cs[r] = collective.NewComm(backloggedTransport{bufferingTransport{tr, capacity}}, collective.Options{SegmentBytes: c.segment})
					t.Cleanup(func() { cs[r].Close() })
				}
				for range 3 {
					allreduceCase(t, cs, kernels.F32, kernels.Sum, c.count)
				}
				wantInline(t, cs, 3, inline)
			})
		}
	}
}

// backloggedTransport's links are bufferingConns that say they hold
// nothing unread (see collective.Backlogged): the in-memory links buffer
// without limit, so what rests on that holds.
type backloggedTransport struct{ bufferingTransport }

func (b backloggedTransport) Conn(peer int) collective.Conn {
	return backloggedConn{bufferingConn{b.Transport.Conn(peer), b.capacity}}
}

type backloggedConn struct{ bufferingConn }

func (backloggedConn) Backlog() int { return 0 }

// TestRingInlineShm runs ring all-reduces that the lead rule takes inline
// over shared memory among 3, 4 and 5 ranks, each rank issuing its
// operations back to back without waiting for the others (so that a link
// may still hold the last operation's messages when the next begins, and
// ranks then differ in how they run it), with one rank whose links
// promise nothing (so that it always runs pipelined beside inline peers):
// no rank may wait for ever and every result must be right. Once all
// have returned, their links hold nothing unread, and one more all-reduce
// of half a ring runs inline on every rank but the one whose links
// promise nothing.
func TestRingInlineShm(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		for _, piped := range []int{-1, 1} {
			t.Run(fmt.Sprintf("n%d/pipelined%d", n, piped), func(t *testing.T) {
				ts := meshtest.Shm(t, n)
				cs := make([]*collective.Comm, n)
				for r, tr := range ts {
					if r == piped {
						tr = promiseless{tr}
					}
					cs[r] = collective.NewComm(tr, collective.Options{})
					t.Cleanup(func() { cs[r].Close() })
				}
				// Sizes by the rings' capacity c (4 MiB at n = 3 and 4, 2
				// MiB beyond in one process): c/2, 3c/4 and 3c/8 run
				// inline by the lead rule alone (the rule of buffers
				// would want 2(2(n-1)/n) times the size), c pipelined.
				c := ts[0].Conn(1).(collective.Buffered).Buffered(0) / 4 // in float32s
				counts := []int{c / 2, 3 * c / 4, 3 * c / 8, c, c / 2, c / 2, 3 * c / 4}
				bufs := make([][][]float32, n)
				for r := range bufs {
					bufs[r] = make([][]float32, len(counts))
					for i, count := range counts {
						bufs[r][i] = make([]float32, count)
						for j := range count {
							bufs[r][i][j] = float32((r*7 + i*3 + j) % 13)
						}
					}
				}
				errs := onAll(t, cs, 2*time.Minute, func(r int, c *collective.Comm) error {
					for i := range counts {
						if err := collective.Allreduce(context.Background(), c, bufs[r][i], kernels.Sum, collective.ReduceOptions{}); err != nil {
							return fmt.Errorf("operation %d: %w", i, err)
						}
					}
					return nil
				})
				meshtest.MustAll(t, errs)
				for r := range n {
					for i, count := range counts {
						for j := range count {
							want := float32(0)
							for q := range n {
								want += float32((q*7 + i*3 + j) % 13)
							}
							if got := bufs[r][i][j]; got != want {
								t.Fatalf("rank %d operation %d element %d: %v, want %v", r, i, j, got, want)
							}
						}
					}
				}
				inBefore := make([]int, n)
				for r, c := range cs {
					inBefore[r], _ = collective.Runs(c)
					if r == piped && inBefore[r] != 0 {
						t.Errorf("rank %d, whose links promise nothing, ran %d operations inline", r, inBefore[r])
					}
				}
				allreduceCase(t, cs, kernels.F32, kernels.Sum, c/2)
				for r, c := range cs {
					in, _ := collective.Runs(c)
					if ran := in > inBefore[r]; ran != (r != piped) {
						t.Errorf("rank %d: the all-reduce of c/2 on drained links ran inline: %v, want %v", r, ran, r != piped)
					}
				}
			})
		}
	}
}

// promiseless hides what its links promise (Buffered, Backlogged and the
// rest): its rank runs every operation past the inline size pipelined.
type promiseless struct{ collective.Transport }

func (p promiseless) Conn(peer int) collective.Conn {
	return struct{ collective.Conn }{p.Transport.Conn(peer)}
}
