package collective_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// hostOfs are the layouts the two-level collectives are tested on: even
// (contiguous and interleaved, as mpirun's by-node mapping places ranks),
// and uneven ones, where all-reduce and all-gather stay flat and broadcast
// still visits the hosts in order.
var hostOfs = [][]int{
	{0, 0, 1, 1},
	{0, 1, 0, 1},
	{0, 0, 0, 1, 1, 1},
	{3, 3, 1, 1, 2, 2},
	{0, 0, 1},
	{0, 0, 1, 1, 1},
	{0, 1, 2},
}

// hierComms builds communicators over mk's mesh that know the layout.
func hierComms(t *testing.T, mk meshtest.Func, hostOf []int, mode collective.Hierarchy, seg, inline int) []*collective.Comm {
	t.Helper()
	return meshtest.Comms(t, mk, len(hostOf), collective.Options{SegmentBytes: seg, InlineBytes: inline, Hosts: hostOf, Hierarchical: mode})
}

// TestHierarchicalCollectives: all-reduce (every dtype and op), all-gather
// with uneven counts and broadcast from every root give the flat
// algorithms' results on every layout and mesh, forced on and automatic.
func TestHierarchicalCollectives(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, hostOf := range hostOfs {
			for _, mode := range []collective.Hierarchy{collective.HierarchyOn, collective.HierarchyAuto} {
				t.Run(fmt.Sprintf("%s/%v/mode%d", tr.Name, hostOf, mode), func(t *testing.T) {
					cs := hierComms(t, tr.Make, hostOf, mode, 64, 256)
					n := len(cs)
					for _, count := range []int{0, 1, n + 1, 1009} {
						for _, dt := range []kernels.DType{kernels.F32, kernels.I64, kernels.F16} {
							for _, op := range kernels.Ops {
								allreduceCase(t, cs, dt, op, count)
							}
						}
					}
					for _, base := range []int{0, 7, 300} {
						allgatherCase(t, cs, vcounts(n, base))
					}
					for root := range n {
						broadcastCase(t, cs, root, 5000)
					}
				})
			}
		}
	}
}

// TestHierarchicalLarge runs multi-megabyte all-reduces at the shipped
// segment size, where each in-host message of a block is as large as a
// link's shared-memory ring (4 MiB): the pipelined phases must neither
// deadlock nor mix blocks up.
func TestHierarchicalLarge(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		for _, seg := range []int{1 << 20, 4 << 20} {
			t.Run(fmt.Sprintf("%s/seg%d", tr.Name, seg), func(t *testing.T) {
				cs := hierComms(t, tr.Make, []int{0, 1, 0, 1}, collective.HierarchyOn, seg, 0)
				count := 3 << 20 // 12 MiB of float32: 6 blocks of 2 MiB at 1 MiB segments
				if raceEnabled {
					count = 1 << 20 // the detector slows element loops ~20x
				}
				allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
				allgatherCase(t, cs, []int{count / 4, count / 3, 0, count / 5})
			})
		}
	}
}

// allgatherCase all-gathers chunks of the given counts, rank r's element e
// being r*1e6+e, and checks every rank's result.
func allgatherCase(t *testing.T, cs []*collective.Comm, counts []int) {
	t.Helper()
	n := len(cs)
	off, total := offsets(counts), sum(counts)
	bufs := make([][]int64, n)
	for r := range bufs {
		bufs[r] = make([]int64, total)
		for e := range counts[r] {
			bufs[r][off[r]+e] = int64(r*1_000_000 + e)
		}
	}
	meshtest.MustAll(t, onAll(t, cs, 60*time.Second, func(r int, c *collective.Comm) error {
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

// broadcastCase broadcasts count bytes from root and checks every rank's.
func broadcastCase(t *testing.T, cs []*collective.Comm, root, count int) {
	t.Helper()
	bufs := make([][]uint8, len(cs))
	for r := range bufs {
		bufs[r] = make([]uint8, count)
		if r == root {
			for i := range bufs[r] {
				bufs[r][i] = uint8(i*31 + root)
			}
		}
	}
	meshtest.MustAll(t, onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
		return collective.Broadcast(context.Background(), c, bufs[r], root)
	}))
	for r := range bufs {
		for i, v := range bufs[r] {
			if v != uint8(i*31+root) {
				t.Fatalf("root %d: rank %d byte %d = %d", root, r, i, v)
			}
		}
	}
}

// TestSetHierarchical: switching between operations takes effect at the
// next one (on hosts {0,1} and {2,3}, rank 0 sends to rank 2 across hosts
// only in two levels: the flat ring sends only to rank 1) and changes no
// result.
func TestSetHierarchical(t *testing.T) {
	ts := meshtest.Mem(t, 4)
	counted := &countingTransport{Transport: ts[0], peer: 2}
	ts[0] = counted
	cs := make([]*collective.Comm, 4)
	for r, tr := range ts {
		cs[r] = collective.NewComm(tr, collective.Options{SegmentBytes: 64, InlineBytes: 256, Hosts: []int{0, 0, 1, 1}, Hierarchical: collective.HierarchyOff})
		defer cs[r].Close()
	}
	for i, mode := range []collective.Hierarchy{collective.HierarchyOn, collective.HierarchyOff, collective.HierarchyAuto, collective.HierarchyOff} {
		for _, c := range cs {
			c.SetHierarchical(mode)
			if got := c.Hierarchical(); got != mode {
				t.Fatalf("Hierarchical() = %d after SetHierarchical(%d)", got, mode)
			}
		}
		before := counted.sends.Load()
		allreduceCase(t, cs, kernels.F64, kernels.Sum, 100*(i+1)) // 800 bytes or more: past the inline size
		if crossed := counted.sends.Load() > before; crossed != (mode != collective.HierarchyOff) {
			t.Fatalf("mode %d: rank 0 sent to rank 2 across hosts: %v", mode, crossed)
		}
	}
}

// countingTransport counts the sends to peer.
type countingTransport struct {
	collective.Transport
	peer  int
	sends atomic.Int64
}

func (c *countingTransport) Conn(peer int) collective.Conn {
	if peer != c.peer {
		return c.Transport.Conn(peer)
	}
	return countingConn{c.Transport.Conn(peer), c}
}

type countingConn struct {
	collective.Conn
	c *countingTransport
}

func (c countingConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	c.c.sends.Add(1)
	return c.Conn.Send(ctx, tag, p)
}

// failingTransport fails rank's send of the k-th message (counting from 0)
// to peer on one collective's links.
type failingTransport struct {
	collective.Transport
	peer int
	k    int64
	sent atomic.Int64
}

var errInjected = errors.New("injected link failure")

func (f *failingTransport) Conn(peer int) collective.Conn {
	c := f.Transport.Conn(peer)
	if peer != f.peer {
		return c
	}
	return failingConn{c, f}
}

type failingConn struct {
	collective.Conn
	f *failingTransport
}

func (c failingConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	if c.f.sent.Add(1)-1 == c.f.k {
		c.f.Transport.Close()
		return errInjected
	}
	return c.Conn.Send(ctx, tag, p)
}

// TestHierarchicalFailureInEachPhase breaks one link in the middle of each
// phase of a pipelined two-level all-reduce on 2 hosts of 2 ranks (hosts
// {0,1} and {2,3}; 64-byte segments and 4096 float32 elements make 128
// blocks, each sending 2 messages from rank 0 to rank 1 (its share of the
// reduce-scatter and of the all-gather inside the host) and 2 to rank 2
// (of the all-reduce across hosts)): rank 0's in-host link to rank 1 and
// its link across hosts to rank 2, at the first, a middle and the last
// message. Every rank must fail (in this operation or, when it had all
// its data before the failure, in the next), rank 0 naming the peer it
// failed to reach, and no rank may hang.
func TestHierarchicalFailureInEachPhase(t *testing.T) {
	for _, tt := range []struct {
		name    string
		peer    int
		message int64
	}{
		{"in-host first", 1, 0},
		{"in-host middle", 1, 129},
		{"in-host last", 1, 255},
		{"across hosts first", 2, 0},
		{"across hosts middle", 2, 128},
		{"across hosts last", 2, 255},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := meshtest.Mem(t, 4)
			ft := &failingTransport{Transport: ts[0], peer: tt.peer, k: tt.message}
			ts[0] = ft
			opts := collective.Options{SegmentBytes: 64, InlineBytes: 256, Hosts: []int{0, 0, 1, 1}, Hierarchical: collective.HierarchyOn}
			cs := make([]*collective.Comm, 4)
			for r, tr := range ts {
				cs[r] = collective.NewComm(tr, opts)
				defer cs[r].Close()
			}
			bufs := make([][]float32, 4)
			for r := range bufs {
				bufs[r] = make([]float32, 4096)
			}
			errs := onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
				return collective.Allreduce(context.Background(), c, bufs[r], kernels.Sum, collective.ReduceOptions{})
			})
			if ft.sent.Load() <= tt.message {
				t.Fatalf("rank 0 sent %d messages to rank %d; the failure at message %d never came", ft.sent.Load(), tt.peer, tt.message)
			}
			// Ranks that had all their data before the failure may finish;
			// the failure then meets them in their next operation.
			next := onAll(t, cs, 30*time.Second, func(r int, c *collective.Comm) error {
				if errs[r] != nil {
					return errs[r]
				}
				return c.Barrier(context.Background())
			})
			for r, err := range next {
				if err == nil {
					t.Fatalf("rank %d: no error after the link failed", r)
				}
			}
			if errs[tt.peer] == nil {
				t.Fatalf("rank %d, which rank 0 failed to reach, finished without error", tt.peer)
			}
			var oe *collective.OpError
			if !errors.Is(errs[0], errInjected) || !errors.As(errs[0], &oe) || oe.Peer != tt.peer {
				t.Fatalf("rank 0: %v; want the injected failure naming peer %d", errs[0], tt.peer)
			}
		})
	}
}
