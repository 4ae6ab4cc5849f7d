package hvd_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

// gorunJob joins n runtimes through a launcher-side rendezvous server, as
// gorun's ranks do, and returns them with the server. configure, if given,
// adjusts each rank's Config besides.
func gorunJob(t *testing.T, n int, configure ...func(cfg *hvd.Config)) ([]*hvd.Runtime, *rendezvous.Server) {
	t.Helper()
	secret := make([]byte, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: n, Hosts: make([]string, n)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rts := hvdtest.Start(t, n, hvdtest.WithConfig(func(cfg *hvd.Config) {
		cfg.Transport, cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = nil, srv.Addr(), secret, 10*time.Second
		for _, c := range configure {
			c(cfg)
		}
	}))
	return rts, srv
}

// reported is what rank reported to the rendezvous as the cause of its
// failure, and whether it reported anything.
func reported(srv *rendezvous.Server, rank int) (string, bool) {
	v, ok := srv.Value(jobenv.FailedBecauseKey(rank))
	return string(v), ok
}

// isPeer reports whether v is the rank of a peer of rank r in a job of n.
func isPeer(v string, r, n int) bool {
	p, err := strconv.Atoi(v)
	return err == nil && p != r && p >= 0 && p < n
}

// TestReportPeerGoneBeforeTheError: when rank 1 goes away, every other
// rank has told the rendezvous which peer's loss failed it by the time its
// operation returns the error; rank 1 reports nothing.
func TestReportPeerGoneBeforeTheError(t *testing.T) {
	const n = 3
	rts, srv := gorunJob(t, n)
	rts[1].Comm().Abort(errors.New("rank 1 crashed")) // its links close, as if it died
	errs := make([]error, n)
	reports := make([]string, n)
	found := make([]bool, n)
	var wg sync.WaitGroup
	for _, r := range []int{0, 2} {
		wg.Go(func() {
			x := hvd.NewTensor("x", make([]float32, 1000))
			errs[r] = rts[r].Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{})
			reports[r], found[r] = reported(srv, r) // read as soon as the error is out
		})
	}
	wg.Wait()
	for _, r := range []int{0, 2} {
		if errs[r] == nil {
			t.Fatalf("rank %d: Allreduce succeeded without rank 1", r)
		}
		if !found[r] || !isPeer(reports[r], r, n) && reports[r] != jobenv.PeerGone {
			t.Errorf("rank %d failed with %v; its report then: %q (present %v), want a peer's rank or %q",
				r, errs[r], reports[r], found[r], jobenv.PeerGone)
		}
	}
	for _, rt := range rts {
		rt.Shutdown()
	}
	if v, ok := reported(srv, 1); ok {
		t.Errorf("rank 1, which failed on its own, reported %q", v)
	}
}

// TestReportPeerShutdown: rank 1 shuts down while every rank has an
// operation in flight (its own is one the others never submit, which keeps
// every engine negotiating); the others' operations fail with ErrShutdown
// naming rank 1, and by the time their Shutdown returns they have reported
// jobenv.PeerShutdown. Rank 1 reports nothing.
func TestReportPeerShutdown(t *testing.T) {
	const n = 3
	rts, srv := gorunJob(t, n)
	own := rts[1].AllreduceAsync(hvd.NewTensor("y", make([]float32, 10)), kernels.Sum, hvd.ReduceOptions{})
	handles := map[int]*hvd.Handle{}
	for _, r := range []int{0, 2} {
		handles[r] = rts[r].AllreduceAsync(hvd.NewTensor("x", make([]float32, 10)), kernels.Sum, hvd.ReduceOptions{})
	}
	if err := rts[1].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := own.Wait(context.Background()); !errors.Is(err, hvd.ErrShutdown) {
		t.Errorf("rank 1: its own operation after its Shutdown = %v, want ErrShutdown", err)
	}
	errs := map[int]error{}
	for r, h := range handles {
		errs[r] = h.Wait(context.Background())
	}
	for r, err := range errs {
		if !errors.Is(err, hvd.ErrShutdown) || !hvd.StoppedByPeerShutdown(rts[r].EngineErr()) {
			t.Errorf("rank %d: Wait = %v, engine stopped with %v; want ErrShutdown for a peer's shutdown", r, err, rts[r].EngineErr())
		}
		if err := rts[r].Shutdown(); err != nil {
			t.Fatal(err)
		}
		if v, ok := reported(srv, r); !ok || v != jobenv.PeerShutdown {
			t.Errorf("rank %d failed with %v and reported %q (present %v), want %q", r, err, v, ok, jobenv.PeerShutdown)
		}
	}
	if v, ok := reported(srv, 1); ok {
		t.Errorf("rank 1, which shut down on its own, reported %q", v)
	}
	if hvd.StoppedByPeerShutdown(rts[1].EngineErr()) {
		t.Errorf("rank 1's own shutdown (%v) reads as a peer's", rts[1].EngineErr())
	}
}

// TestReportSilentPeer: rank 1 submits nothing while rank 0 all-reduces
// under a short op timeout, as if rank 1 were stopped. Rank 0's operation
// fails naming rank 1 as not answering, and by then rank 0 has reported
// jobenv.SilentBecause([1], the timeout), which gorun reads to name rank 1.
func TestReportSilentPeer(t *testing.T) {
	const opTimeout = 300 * time.Millisecond
	rts, srv := gorunJob(t, 2, func(cfg *hvd.Config) { cfg.OpTimeout = opTimeout })
	x := hvd.NewTensor("x", make([]float32, 10))
	err := rts[0].Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{})
	v, ok := reported(srv, 0) // read as soon as the error is out
	if na, isNA := errors.AsType[*engine.NoAnswerError](err); !isNA || !slices.Equal(na.Silent, []int{1}) {
		t.Fatalf("rank 0: Allreduce = %v, want a NoAnswerError naming rank 1", err)
	}
	if want := jobenv.SilentBecause([]int{1}, opTimeout); !ok || v != want {
		t.Errorf("rank 0 reported %q (present %v), want %q", v, ok, want)
	}
}

// TestReportSilentPeerOnComm: the same, with rank 0 all-reducing on the
// runtime's communicator itself (Runtime.Comm, bounded by the op timeout
// as the engine is): its call fails with a *collective.OpTimeoutError
// naming rank 1, and by then rank 0 has reported
// jobenv.SilentBecause([1], the timeout).
func TestReportSilentPeerOnComm(t *testing.T) {
	const opTimeout = 300 * time.Millisecond
	rts, srv := gorunJob(t, 2, func(cfg *hvd.Config) { cfg.OpTimeout = opTimeout })
	comm := rts[0].Comm()
	if got := comm.OpTimeout(); got != opTimeout {
		t.Fatalf("the runtime's Comm has op timeout %v, want the job's %v", got, opTimeout)
	}
	start := time.Now()
	err := collective.Allreduce(context.Background(), comm, make([]float32, 10), kernels.Sum, collective.ReduceOptions{})
	took := time.Since(start)
	v, ok := reported(srv, 0) // read as soon as the error is out
	te, isTE := errors.AsType[*collective.OpTimeoutError](err)
	if !isTE || te.Peer != 1 || te.Limit != opTimeout {
		t.Fatalf("rank 0: Allreduce = %v, want an OpTimeoutError naming rank 1 after %v", err, opTimeout)
	}
	if took < opTimeout {
		t.Errorf("failed %v after the call, before the op timeout %v", took, opTimeout)
	}
	if want := jobenv.SilentBecause([]int{1}, opTimeout); !ok || v != want {
		t.Errorf("rank 0 reported %q (present %v), want %q", v, ok, want)
	}
}
