package hvd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/rendezvous"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// each runs f on every runtime concurrently and fails on any error.
func each(t testing.TB, rts []*hvd.Runtime, f func(r int, rt *hvd.Runtime) error) {
	t.Helper()
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error { return f(rt.Rank(), rt) })
}

func TestCollectivesOnNamedTensors(t *testing.T) {
	const n = 3
	rts := hvdtest.Start(t, n)
	ctx := context.Background()
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		grad := hvd.NewTensor("grad", []float32{float32(r), 1, 2, 3}, 2, 2)
		if err := rt.Allreduce(ctx, grad, kernels.Average, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if got := hvd.Values[float32](grad); got[0] != 1 || got[3] != 3 {
			return fmt.Errorf("average = %v", got)
		}
		w := hvd.NewTensor("w", []int64{int64(r * 10), int64(r*10 + 1)})
		if err := rt.Broadcast(ctx, w, 2); err != nil {
			return err
		}
		if got := hvd.Values[int64](w); got[0] != 20 || got[1] != 21 {
			return fmt.Errorf("broadcast = %v", got)
		}
		// rank r contributes r+1 rows of 2 columns.
		rows := make([]float64, 2*(r+1))
		for i := range rows {
			rows[i] = float64(r)
		}
		out, err := rt.Allgather(ctx, hvd.NewTensor("rows", rows, r+1, 2))
		if err != nil {
			return err
		}
		want := []float64{0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}
		if got := hvd.Values[float64](out); fmt.Sprint(got) != fmt.Sprint(want) || out.Shape[0] != 6 {
			return fmt.Errorf("allgather = %v shape %v", got, out.Shape)
		}
		share, err := rt.ReduceScatter(ctx, hvd.NewTensor("rs", []int32{1, 2, 3, 4, 5, 6, 7}), kernels.Sum, hvd.ReduceOptions{})
		if err != nil {
			return err
		}
		wantShare := [][]int32{{3, 6, 9}, {12, 15}, {18, 21}}[r]
		if got := hvd.Values[int32](share); fmt.Sprint(got) != fmt.Sprint(wantShare) {
			return fmt.Errorf("reducescatter = %v, want %v", got, wantShare)
		}
		// rank r sends p+1 rows to rank p; rows carry their sender.
		splits := []int{1, 2, 3}
		send := make([]uint8, 6)
		for i := range send {
			send[i] = uint8(r)
		}
		got, err := rt.Alltoall(ctx, hvd.NewTensor("a2a", send), splits)
		if err != nil {
			return err
		}
		if v := hvd.Values[uint8](got); len(v) != 3*(r+1) || v[0] != 0 || v[len(v)-1] != 2 {
			return fmt.Errorf("alltoall = %v", v)
		}
		return rt.Barrier(ctx)
	})
}

func TestAsyncHandlesInOrder(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		var hs []*hvd.Handle
		var ts []*hvd.Tensor
		for i := range 20 {
			x := hvd.NewTensor(fmt.Sprintf("layer%d", i), []float32{float32(i), float32(r)})
			ts = append(ts, x)
			hs = append(hs, rt.AllreduceAsync(x, kernels.Sum, hvd.ReduceOptions{}))
		}
		for i, h := range hs {
			if err := h.Wait(context.Background()); err != nil {
				return err
			}
			if v := hvd.Values[float32](ts[i]); v[0] != float32(2*i) || v[1] != 1 {
				return fmt.Errorf("layer%d = %v", i, v)
			}
			if h.Output() != ts[i] {
				return fmt.Errorf("layer%d: Output is not the in-place tensor", i)
			}
		}
		return nil
	})
}

func TestDuplicateNameAndShutdown(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	x := hvd.NewTensor("x", []float32{1})
	h1 := rts[0].AllreduceAsync(x, kernels.Sum, hvd.ReduceOptions{}) // rank 1 has not joined: stays in flight
	h2 := rts[0].AllreduceAsync(hvd.NewTensor("x", []float32{2}), kernels.Sum, hvd.ReduceOptions{})
	if err := h2.Wait(context.Background()); !errors.Is(err, hvd.ErrDuplicateName) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := rts[1].Allreduce(context.Background(), hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h1.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	rts[0].Shutdown()
	if err := rts[0].Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrShutdown) {
		t.Fatalf("after shutdown: %v", err)
	}
}

func TestInvalidTensor(t *testing.T) {
	rt := hvdtest.Start(t, 1)[0]
	bad := &hvd.Tensor{Name: "t", DType: kernels.F32, Shape: []int{3}, Data: make([]byte, 8)}
	if err := rt.Allreduce(context.Background(), bad, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrInvalidTensor) {
		t.Fatalf("got %v", err)
	}
}

// TestFailureReachesEveryRank: one rank's runtime goes away mid-job; every
// other rank's pending operation fails, naming the operation and tensor.
func TestFailureReachesEveryRank(t *testing.T) {
	const n = 4
	rts := hvdtest.Start(t, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 1; r < n; r++ {
		wg.Go(func() {
			errs[r] = rts[r].Allreduce(context.Background(), hvd.NewTensor("g", make([]float32, 1<<20)), kernels.Sum, hvd.ReduceOptions{})
		})
	}
	time.Sleep(50 * time.Millisecond)
	rts[0].Shutdown() // rank 0 never joins the all-reduce and leaves
	wg.Wait()
	for r := 1; r < n; r++ {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), `allreduce "g"`) {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
	}
}

func TestSingleRankWithoutLauncher(t *testing.T) {
	t.Setenv(jobenv.EnvRank, "")
	if err := hvd.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer hvd.Shutdown()
	if hvd.Rank() != 0 || hvd.Size() != 1 || hvd.LocalSize() != 1 || hvd.CurrentDevice().IsGPU() {
		t.Fatalf("rank %d size %d local size %d device %v", hvd.Rank(), hvd.Size(), hvd.LocalSize(), hvd.CurrentDevice())
	}
	x := hvd.NewTensor("x", []float64{1.5, 2})
	if err := hvd.Allreduce(context.Background(), x, kernels.Average, hvd.ReduceOptions{}); err != nil || hvd.Values[float64](x)[0] != 1.5 {
		t.Fatalf("%v %v", err, hvd.Values[float64](x))
	}
}

func TestNotInitialized(t *testing.T) {
	if hvd.Rank() != -1 {
		t.Fatalf("Rank before Init = %d", hvd.Rank())
	}
	if err := hvd.Barrier(context.Background()); !errors.Is(err, hvd.ErrNotInitialized) {
		t.Fatalf("got %v", err)
	}
}

// rendezvousJob starts a launcher-side rendezvous server for n ranks.
func rendezvousJob(t *testing.T, n int) (secret []byte, addr string) {
	t.Helper()
	secret = bytes.Repeat([]byte{5}, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: n, Hosts: make([]string, n)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return secret, srv.Addr()
}

// TestRendezvousAndTCP joins 4 runtimes the way gorun's ranks do: through
// the rendezvous and a TCP mesh.
func TestRendezvousAndTCP(t *testing.T) {
	const n = 4
	secret, addr := rendezvousJob(t, n)
	rts := hvdtest.Start(t, n, hvdtest.WithConfig(func(cfg *hvd.Config) {
		cfg.Transport, cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = nil, addr, secret, 10*time.Second
	}))
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		x := hvd.NewTensor("x", []int32{int32(r), 1})
		if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if v := hvd.Values[int32](x); v[0] != 6 || v[1] != 4 {
			return fmt.Errorf("sum = %v", v)
		}
		// Every rank registered its machine, and every rank learnt them all:
		// one process here, so one machine.
		if got, want := rt.MachineOf(), slices.Repeat([]string{jobenv.MachineID()}, n); !slices.Equal(got, want) {
			return fmt.Errorf("machines %q, want %q", got, want)
		}
		return nil
	})
}

func TestStartTimeoutNamesMissingRanks(t *testing.T) {
	secret, addr := rendezvousJob(t, 3)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 { // rank 2 never comes
		cfg := hvdtest.Config(r, 3)
		cfg.RendezvousAddr, cfg.Secret, cfg.StartTimeout = addr, secret, time.Second
		wg.Go(func() {
			rt, err := hvd.NewRuntime(context.Background(), cfg)
			if err == nil {
				rt.Shutdown()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), "within 1s") {
			t.Fatalf("rank %d: %v", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

// TestShuffledSubmissionOrders: every rank submits the same named
// tensors in its own order; the engine matches them by name.
func TestShuffledSubmissionOrders(t *testing.T) {
	const n, tensors = 4, 30
	rts := hvdtest.Start(t, n)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		for step := range 3 {
			order := rand.New(rand.NewPCG(uint64(r), uint64(step))).Perm(tensors)
			hs := make([]*hvd.Handle, tensors)
			ts := make([]*hvd.Tensor, tensors)
			for _, i := range order {
				ts[i] = hvd.NewTensor(fmt.Sprintf("layer%d/grad", i), []float32{float32(r), float32(i)})
				hs[i] = rt.AllreduceAsync(ts[i], kernels.Average, hvd.ReduceOptions{})
			}
			for i, h := range hs {
				if err := h.Wait(context.Background()); err != nil {
					return err
				}
				if v := hvd.Values[float32](ts[i]); v[0] != 1.5 || v[1] != float32(i) {
					return fmt.Errorf("step %d layer%d = %v", step, i, v)
				}
			}
		}
		return nil
	})
}

// TestMismatchOnEveryRank: a shape mismatch fails the operation on every
// rank, naming the tensor and both shapes.
func TestMismatchOnEveryRank(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		shape := []int{3, 4}
		if r == 2 {
			shape = []int{4, 3}
		}
		err := rt.Allreduce(context.Background(), hvd.NewTensor("w1", make([]float32, 12), shape...), kernels.Sum, hvd.ReduceOptions{})
		want := `hvd: allreduce "w1" on rank ` + fmt.Sprint(r) + `: engine: tensor "w1": shape mismatch: rank 0 has [3 4], rank 2 has [4 3]`
		if err == nil || err.Error() != want {
			return fmt.Errorf("got %v\nwant %s", err, want)
		}
		return nil
	})
}

// TestJoin: rank 1 has one batch less; it joins and the others' averages
// complete with it contributing zeros (dividing by the full size).
func TestJoin(t *testing.T) {
	const n = 3
	rts := hvdtest.Start(t, n)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		batches := 4
		if r == 1 {
			batches = 3
		}
		for b := range batches {
			g := hvd.NewTensor("grad", []float64{3})
			if err := rt.Allreduce(context.Background(), g, kernels.Average, hvd.ReduceOptions{}); err != nil {
				return err
			}
			want := 3.0
			if b == 3 {
				want = 2 // ranks 0 and 2 only, divided by 3
			}
			if v := hvd.Values[float64](g)[0]; v != want {
				return fmt.Errorf("batch %d: average %v, want %v", b, v, want)
			}
		}
		if r != 1 {
			time.Sleep(10 * time.Millisecond)
		}
		last, err := rt.Join(context.Background())
		if err != nil {
			return err
		}
		if last == 1 {
			return fmt.Errorf("rank 1 joined first, yet Join says it was last")
		}
		return nil
	})
}

func TestGroupedAllreduce(t *testing.T) {
	rts := hvdtest.Start(t, 2)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		a := hvd.NewTensor("a", []float32{1, float32(r)})
		b := hvd.NewTensor("b", []int64{int64(r), 5})
		ts := []*hvd.Tensor{a, b}
		if r == 1 {
			ts = []*hvd.Tensor{b, a} // the group's identity does not depend on the order
		}
		if err := rt.GroupedAllreduce(context.Background(), ts, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		if fmt.Sprint(hvd.Values[float32](a), hvd.Values[int64](b)) != "[2 1] [1 10]" {
			return fmt.Errorf("%v %v", hvd.Values[float32](a), hvd.Values[int64](b))
		}
		return nil
	})
}

// TestTimelineFile: rank 0 writes the timeline named by the environment
// and closes it at Shutdown; it is a JSON array of trace events.
func TestTimelineFile(t *testing.T) {
	const n = 2
	path := filepath.Join(t.TempDir(), "timeline.json")
	rts := hvdtest.Start(t, n, hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.TimelinePath = path }))
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		return rt.Allreduce(context.Background(), hvd.NewTensor("grad", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	})
	for _, rt := range rts {
		rt.Shutdown()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	if err := json.Unmarshal(data, &events); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	if !strings.Contains(string(data), `"NEGOTIATE_ALLREDUCE"`) || !strings.Contains(string(data), `"name":"grad"`) {
		t.Fatalf("timeline lacks the tensor's events:\n%s", data)
	}
}

// TestCommAfterNamedOperations: Runtime.Comm waits for the engine to go
// idle, after which direct collectives work on every rank.
func TestCommAfterNamedOperations(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		if err := rt.Allreduce(context.Background(), hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return err
		}
		y := []int32{int32(r)}
		if err := collective.Allreduce(context.Background(), rt.Comm(), y, kernels.Sum, collective.ReduceOptions{}); err != nil {
			return err
		}
		if y[0] != 3 {
			return fmt.Errorf("direct all-reduce = %v", y)
		}
		return rt.Barrier(context.Background())
	})
}

// TestInvalidSplitsOnEveryRank: splits that do not fit fail the all-to-all
// on every rank (nobody is left waiting) and the job goes on.
func TestInvalidSplitsOnEveryRank(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		_, err := rt.Alltoall(context.Background(), hvd.NewTensor("a2a", make([]float32, 5)), nil)
		if !errors.Is(err, hvd.ErrInvalidTensor) || !strings.Contains(err.Error(), "5 rows do not split evenly over 3 ranks") {
			return fmt.Errorf("got %v", err)
		}
		return rt.Barrier(context.Background())
	})
}
