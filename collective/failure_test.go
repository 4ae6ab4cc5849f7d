package collective_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/kernels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const faultLimit = 2 * time.Second

// checkFailure asserts that every rank returned an OpError for op within
// faultLimit of the fault, and that later calls fail fast with the same cause.
func checkFailure(t *testing.T, cs []*collective.Comm, errs []error, returned []time.Time, fault time.Time, skip int) {
	t.Helper()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: the operation succeeded despite the fault", r)
		}
		if d := returned[r].Sub(fault); d > faultLimit {
			t.Errorf("rank %d returned %v after the fault", r, d)
		}
		if r == skip {
			continue
		}
		var oe *collective.OpError
		if !errors.As(err, &oe) || oe.Op != "allreduce" || oe.Rank != r || oe.Peer < 0 || oe.Step < 0 {
			t.Fatalf("rank %d: error does not name op, rank, peer and step: %v", r, err)
		}
		t.Logf("rank %d: %v", r, err)
		start := time.Now()
		later := cs[r].Barrier(context.Background())
		if !errors.Is(later, err) || time.Since(start) > 100*time.Millisecond {
			t.Fatalf("rank %d: later call returned %v after %v; want the first cause at once", r, later, time.Since(start))
		}
	}
}

// bigAllreduce starts a 16 MiB all-reduce on every rank and records when
// each returned.
func bigAllreduce(t *testing.T, cs []*collective.Comm, ctxs []context.Context) ([]error, []time.Time) {
	returned := make([]time.Time, len(cs))
	errs := onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
		buf := make([]float32, 4<<20)
		err := collective.Allreduce(ctxs[r], c, buf, kernels.Sum, collective.ReduceOptions{})
		returned[r] = time.Now()
		return err
	})
	return errs, returned
}

func background(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = context.Background()
	}
	return ctxs
}

func TestDropPeerMidOperation(t *testing.T) {
	const n = 4
	net := memtransport.NewNetwork(n)
	net.SetDelay(0, 1, 300*time.Millisecond) // the operation cannot finish before the fault
	cs := make([]*collective.Comm, n)
	for r, tr := range net.Transports() {
		cs[r] = collective.NewComm(tr, collective.Options{SegmentBytes: 64 << 10})
		defer cs[r].Close()
	}
	var fault time.Time
	timer := time.AfterFunc(100*time.Millisecond, func() { fault = time.Now(); net.DropPeer(2) })
	defer timer.Stop()
	errs, returned := bigAllreduce(t, cs, background(n))
	checkFailure(t, cs, errs, returned, fault, 2)
	if !errors.Is(errs[1], collective.ErrPeerGone) && !errors.Is(errs[3], collective.ErrPeerGone) {
		t.Fatalf("the neighbours of the dropped rank do not report it gone: %v / %v", errs[1], errs[3])
	}
}

func TestBrokenLinkMidOperation(t *testing.T) {
	const n = 3
	net := memtransport.NewNetwork(n)
	net.SetDelay(2, 0, 300*time.Millisecond) // the operation cannot finish before the fault
	cs := make([]*collective.Comm, n)
	for r, tr := range net.Transports() {
		cs[r] = collective.NewComm(tr, collective.Options{SegmentBytes: 64 << 10})
		defer cs[r].Close()
	}
	var fault time.Time
	timer := time.AfterFunc(50*time.Millisecond, func() { fault = time.Now(); net.BreakLink(1, 2) })
	defer timer.Stop()
	errs, returned := bigAllreduce(t, cs, background(n))
	checkFailure(t, cs, errs, returned, fault, -1)
}

// TestPeerCloses: a rank's transport closes mid-operation, as when its
// process dies; every other rank's pending call fails quickly, over TCP
// (ranks on different hosts) and over shared memory (ranks on one host).
func TestPeerCloses(t *testing.T) {
	for _, tr := range meshtest.Kinds() {
		if tr.Name == "mem" {
			continue // memtransport's faults are the tests above
		}
		t.Run(tr.Name, func(t *testing.T) {
			const n = 4
			cs := meshtest.Comms(t, tr.Make, n, collective.Options{SegmentBytes: 64 << 10})
			var fault time.Time
			timer := time.AfterFunc(30*time.Millisecond, func() { fault = time.Now(); cs[3].Close() })
			defer timer.Stop()
			returned := make([]time.Time, n)
			errs := onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
				// Keep all-reducing until the fault stops us.
				buf := make([]float32, 1<<20)
				for {
					if err := collective.Allreduce(context.Background(), c, buf, kernels.Sum, collective.ReduceOptions{}); err != nil {
						returned[r] = time.Now()
						return err
					}
				}
			})
			checkFailure(t, cs, errs, returned, fault, 3)
			if !errors.Is(errs[3], collective.ErrClosed) {
				t.Fatalf("the closed rank reports %v, want ErrClosed", errs[3])
			}
		})
	}
}

func TestCancelFailsEveryRank(t *testing.T) {
	const n = 3
	net := memtransport.NewNetwork(n)
	net.SetDelay(1, 2, 300*time.Millisecond) // the operation cannot finish before the cancel
	cs := make([]*collective.Comm, n)
	for r, tr := range net.Transports() {
		cs[r] = collective.NewComm(tr, collective.Options{SegmentBytes: 64 << 10})
		defer cs[r].Close()
	}
	ctxs := background(n)
	ctx, cancel := context.WithCancel(context.Background())
	ctxs[0] = ctx
	var fault time.Time
	timer := time.AfterFunc(50*time.Millisecond, func() { fault = time.Now(); cancel() })
	defer timer.Stop()
	errs, returned := bigAllreduce(t, cs, ctxs)
	if !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("rank 0: %v, want context.Canceled", errs[0])
	}
	checkFailure(t, cs, errs, returned, fault, 0)
}

func TestInvalidArgumentFailsEveryRank(t *testing.T) {
	cs := meshtest.Comms(t, meshtest.Mem, 3, collective.Options{})
	errs := onAll(t, cs, 5*time.Second, func(r int, c *collective.Comm) error {
		buf := make([]byte, 100<<10)
		if r == 1 {
			buf = buf[:len(buf)-1] // not a whole number of float32s, on one rank only
		}
		return c.Allreduce(context.Background(), kernels.F32, buf, kernels.Sum, collective.ReduceOptions{})
	})
	if !errors.Is(errs[1], collective.ErrInvalid) {
		t.Fatalf("rank 1: %v, want ErrInvalid", errs[1])
	}
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d succeeded", r)
		}
	}
}

func TestCloseThenCall(t *testing.T) {
	cs := meshtest.Comms(t, meshtest.Mem, 2, collective.Options{})
	cs[0].Close()
	if err := cs[0].Barrier(context.Background()); !errors.Is(err, collective.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// closingSendTransport fails rank 0's first send to peer 1 the way a link
// may break: it closes the whole transport and returns errInjected only
// after the pending receive has seen the closing, the order that once made
// rank 0 blame the closing on peer 1's receive instead of the send.
type closingSendTransport struct {
	collective.Transport
	recvFailed chan struct{}
	once       sync.Once
}

func (f *closingSendTransport) Conn(peer int) collective.Conn {
	return closingSendConn{f.Transport.Conn(peer), f}
}

type closingSendConn struct {
	collective.Conn
	f *closingSendTransport
}

func (c closingSendConn) Send(ctx context.Context, tag collective.Tag, p []byte) error {
	if tag.Step == 1 { // the second message: the receiver is waiting by then
		c.f.Transport.Close()
		select {
		case <-c.f.recvFailed:
		case <-time.After(10 * time.Second):
		}
		return errInjected
	}
	return c.Conn.Send(ctx, tag, p)
}

func (c closingSendConn) Recv(ctx context.Context, tag collective.Tag, p []byte) error {
	err := c.Conn.Recv(ctx, tag, p)
	if err != nil {
		c.f.once.Do(func() { close(c.f.recvFailed) })
	}
	return err
}

// TestSendFailureBlamedOverItsClosing: when a send fails and the closing
// of the transport reaches a concurrent receive first, the operation still
// reports the send's failure, naming its peer, and the communicator keeps
// it as its cause.
func TestSendFailureBlamedOverItsClosing(t *testing.T) {
	ts := meshtest.Mem(t, 2)
	ft := &closingSendTransport{Transport: ts[0], recvFailed: make(chan struct{})}
	cs := []*collective.Comm{
		collective.NewComm(ft, collective.Options{SegmentBytes: 64, InlineBytes: 64}),
		collective.NewComm(ts[1], collective.Options{SegmentBytes: 64, InlineBytes: 64}),
	}
	for _, c := range cs {
		defer c.Close()
	}
	errs := onAll(t, cs, 20*time.Second, func(r int, c *collective.Comm) error {
		return collective.Allreduce(context.Background(), c, make([]float32, 1024), kernels.Sum, collective.ReduceOptions{})
	})
	var oe *collective.OpError
	if !errors.Is(errs[0], errInjected) || !errors.As(errs[0], &oe) || oe.Peer != 1 {
		t.Fatalf("rank 0: %v; want the injected send failure naming peer 1", errs[0])
	}
	if err := cs[0].Err(); !errors.Is(err, errInjected) {
		t.Fatalf("rank 0's communicator keeps %v as its cause; want the send failure", err)
	}
	if errs[1] == nil {
		t.Fatal("rank 1 finished without error")
	}
}

// TestOpTimeoutNamesSilentPeer: a rank that neither calls nor goes away
// (a stopped process keeps its links) holds the others' operations up only
// until Options.OpTimeout: they fail between it and 9/8 of it (plus a
// loaded machine's slack) with an *OpTimeoutError, which wraps
// ErrOpTimeout and ErrTimeout and names the peer waited for, or, on a rank
// whose peer failed so first, ErrPeerGone. Rank 0 waits for the silent rank 1
// in both layouts (2 ranks; 3, where rank 2 folds into rank 0), on every
// kind of transport; a Comm without the option is unaffected (the rest of
// this package).
func TestOpTimeoutNamesSilentPeer(t *testing.T) {
	const limit = 300 * time.Millisecond
	for _, kind := range meshtest.Kinds() {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/n=%d", kind.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, kind.Make, n, collective.Options{OpTimeout: limit})
				if got := cs[0].OpTimeout(); got != limit {
					t.Fatalf("OpTimeout() = %v, want %v", got, limit)
				}
				// A first all-reduce with everyone: operations that end
				// in time are not touched.
				onAll(t, cs, 10*time.Second, func(r int, c *collective.Comm) error {
					return collective.Allreduce(context.Background(), c, []float32{1}, kernels.Sum, collective.ReduceOptions{})
				})
				errs := make([]error, n)
				took := make([]time.Duration, n)
				onAll(t, cs, 20*time.Second, func(r int, c *collective.Comm) error {
					if r == 1 {
						return nil // silent: never calls, never closes
					}
					start := time.Now()
					errs[r] = collective.Allreduce(context.Background(), c, make([]float32, 1000), kernels.Sum, collective.ReduceOptions{})
					took[r] = time.Since(start)
					return nil
				})
				for r, err := range errs {
					if r == 1 {
						continue
					}
					if err == nil {
						t.Fatalf("rank %d: the all-reduce succeeded without rank 1", r)
					}
					if took[r] > limit*9/8+5*time.Second {
						t.Errorf("rank %d failed %v after it began, far past the op timeout %v", r, took[r], limit)
					}
					if errors.Is(err, collective.ErrPeerGone) && r != 0 {
						continue
					}
					if !errors.Is(err, collective.ErrOpTimeout) || !errors.Is(err, collective.ErrTimeout) {
						t.Fatalf("rank %d: %v; want ErrOpTimeout and ErrTimeout", r, err)
					}
					if took[r] < limit {
						t.Errorf("rank %d timed out %v after it began, before the op timeout %v", r, took[r], limit)
					}
					var te *collective.OpTimeoutError
					if !errors.As(err, &te) || te.Peer < 0 || te.Peer == r || te.Rank != r || te.Limit != limit {
						t.Fatalf("rank %d: %v (%+v) names no peer it waited for, or not this rank or limit", r, err, te)
					}
					if r == 0 && te.Peer != 1 {
						t.Errorf("rank 0 names peer %d, want the silent rank 1: %v", te.Peer, err)
					}
				}
				if err := collective.Allreduce(context.Background(), cs[0], []float32{1}, kernels.Sum, collective.ReduceOptions{}); !errors.Is(err, collective.ErrOpTimeout) {
					t.Errorf("after the timeout, rank 0's next call: %v; want the Comm failed by it", err)
				}
			})
		}
	}
}
