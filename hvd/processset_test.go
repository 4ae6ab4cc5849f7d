package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/kernels"
)

// addSet adds a process set of ranks on every runtime and returns each
// rank's ProcessSet.
func addSet(t *testing.T, rts []*hvd.Runtime, ranks []int) []*hvd.ProcessSet {
	t.Helper()
	sets := make([]*hvd.ProcessSet, len(rts))
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) (err error) {
		sets[rt.Rank()], err = rt.AddProcessSet(context.Background(), ranks)
		return err
	})
	return sets
}

// setCollectives runs every kind of collective on ps from rank g (in the
// set) and checks each result against its closed form.
func setCollectives(ctx context.Context, ps *hvd.ProcessSet, g int) error {
	ranks, i, n := ps.Ranks(), ps.Rank(), ps.Size()
	if ranks[i] != g {
		return fmt.Errorf("set rank %d is rank %d, want %d", i, ranks[i], g)
	}
	sum := 0
	for _, r := range ranks {
		sum += r + 1
	}
	x := hvd.NewTensor("x", []float64{float64(g + 1), 1})
	if err := ps.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return err
	}
	if got := hvd.Values[float64](x); got[0] != float64(sum) || got[1] != float64(n) {
		return fmt.Errorf("allreduce: %v, want [%d %d]", got, sum, n)
	}
	avg := hvd.NewTensor("avg", []float64{float64(g + 1)})
	if err := ps.AllreduceAsync(avg, kernels.Average, hvd.ReduceOptions{}).Wait(ctx); err != nil {
		return err
	}
	if got := hvd.Values[float64](avg)[0]; got != float64(sum)/float64(n) {
		return fmt.Errorf("average: %v, want %v", got, float64(sum)/float64(n))
	}
	// i+1 rows of rank g from the set's rank i.
	rows := slices.Repeat([]int32{int32(g)}, i+1)
	out, err := ps.Allgather(ctx, hvd.NewTensor("rows", rows, i+1))
	if err != nil {
		return err
	}
	var want []int32
	for j, r := range ranks {
		want = append(want, slices.Repeat([]int32{int32(r)}, j+1)...)
	}
	if got := hvd.Values[int32](out); !slices.Equal(got, want) {
		return fmt.Errorf("allgather: %v, want %v", got, want)
	}
	root := ranks[n-1]
	b := hvd.NewTensor("b", []int64{int64(g)})
	if err := ps.Broadcast(ctx, b, root); err != nil {
		return err
	}
	if got := hvd.Values[int64](b)[0]; got != int64(root) {
		return fmt.Errorf("broadcast from %d: %d", root, got)
	}
	// Reduce-scatter of n rows, row j holding j+g: share i is row i summed.
	rs := make([]float32, n)
	for j := range rs {
		rs[j] = float32(j + g)
	}
	share, err := ps.ReduceScatter(ctx, hvd.NewTensor("rs", rs, n), kernels.Sum, hvd.ReduceOptions{})
	if err != nil {
		return err
	}
	if got, w := hvd.Values[float32](share), float32(n*i+sum-n); len(got) != 1 || got[0] != w {
		return fmt.Errorf("reducescatter: %v, want [%v]", got, w)
	}
	// All-to-all: row j goes to the set's rank j and carries 100g+j.
	a2a := make([]int32, n)
	for j := range a2a {
		a2a[j] = int32(100*g + j)
	}
	got, err := ps.Alltoall(ctx, hvd.NewTensor("a2a", a2a, n), nil)
	if err != nil {
		return err
	}
	want = want[:0]
	for _, r := range ranks {
		want = append(want, int32(100*r+i))
	}
	if v := hvd.Values[int32](got); !slices.Equal(v, want) {
		return fmt.Errorf("alltoall: %v, want %v", v, want)
	}
	ga, gb := hvd.NewTensor("ga", []int32{1}), hvd.NewTensor("gb", []int32{int32(g)})
	if err := ps.GroupedAllreduce(ctx, []*hvd.Tensor{ga, gb}, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return err
	}
	if hvd.Values[int32](ga)[0] != int32(n) || hvd.Values[int32](gb)[0] != int32(sum-n) {
		return fmt.Errorf("grouped allreduce: %v %v", hvd.Values[int32](ga), hvd.Values[int32](gb))
	}
	return ps.Barrier(ctx)
}

// outsider checks that every collective fails on a rank outside ps.
func outsider(ctx context.Context, ps *hvd.ProcessSet) error {
	x := hvd.NewTensor("x", []float64{1})
	errs := []error{
		ps.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}),
		ps.AllreduceAsync(x, kernels.Sum, hvd.ReduceOptions{}).Wait(ctx),
		ps.Broadcast(ctx, x, ps.Ranks()[0]),
		ps.Barrier(ctx),
		ps.GroupedAllreduce(ctx, []*hvd.Tensor{x}, kernels.Sum, hvd.ReduceOptions{}),
	}
	_, err := ps.Allgather(ctx, x)
	errs = append(errs, err)
	_, err = ps.Alltoall(ctx, x, nil)
	errs = append(errs, err)
	_, err = ps.ReduceScatter(ctx, x, kernels.Sum, hvd.ReduceOptions{})
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, hvd.ErrNotInProcessSet) {
			return fmt.Errorf("operation %d outside the set: %v, want ErrNotInProcessSet", i, err)
		}
	}
	if ps.Included() || ps.Rank() != -1 {
		return fmt.Errorf("outside the set: Included %v, Rank %d", ps.Included(), ps.Rank())
	}
	return nil
}

// TestProcessSetCollectives: on jobs of 2, 3 and 4 ranks, every collective
// on a set (the ranks after the first, a pair of the first and last, and a
// single rank) gives its closed-form result, ranks outside fail with
// ErrNotInProcessSet, and the job's own collectives still run.
func TestProcessSetCollectives(t *testing.T) {
	for n := 2; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rts := hvdtest.Start(t, n)
			var all []int
			for r := 1; r < n; r++ {
				all = append(all, r)
			}
			for _, ranks := range [][]int{all, {0, n - 1}, {n - 1}} {
				sets := addSet(t, rts, ranks)
				hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
					ctx, ps := context.Background(), sets[rt.Rank()]
					if ps.Size() != len(ranks) || !slices.Equal(ps.Ranks(), ranks) {
						return fmt.Errorf("set %v: size %d, ranks %v", ranks, ps.Size(), ps.Ranks())
					}
					if !slices.Contains(ranks, rt.Rank()) {
						return outsider(ctx, ps)
					}
					if err := setCollectives(ctx, ps, rt.Rank()); err != nil {
						return fmt.Errorf("%v: %w", ps, err)
					}
					return nil
				})
			}
			hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
				x := hvd.NewTensor("global", []int32{1})
				if err := rt.Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
					return err
				}
				if got := hvd.Values[int32](x)[0]; got != int32(n) {
					return fmt.Errorf("global allreduce: %d, want %d", got, n)
				}
				if got := len(rt.ProcessSets()); got != 3 {
					return fmt.Errorf("%d live sets, want 3", got)
				}
				return nil
			})
		})
	}
}

// TestProcessSetsConcurrent: two overlapping sets of a job of 4 ranks and
// the job itself run all-reduces from three goroutines per rank at once,
// each under the same names, and every result is its set's sum.
func TestProcessSetsConcurrent(t *testing.T) {
	rts := hvdtest.Start(t, 4)
	a := addSet(t, rts, []int{0, 1, 2})
	b := addSet(t, rts, []int{1, 2, 3})
	const steps = 30
	loop := func(ctx context.Context, g int, run func(*hvd.Tensor) error, want float64) error {
		for s := range steps {
			x := hvd.NewTensor("x", []float64{float64(g + s)})
			if err := run(x); err != nil {
				return err
			}
			if got := hvd.Values[float64](x)[0]; got != want+float64(s) {
				return fmt.Errorf("step %d: %v, want %v", s, got, want+float64(s))
			}
		}
		return nil
	}
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ctx, g := context.Background(), rt.Rank()
		var wg sync.WaitGroup
		errs := make([]error, 3)
		sets := []struct {
			ps   *hvd.ProcessSet
			want float64
		}{{a[g], 0 + 1 + 2}, {b[g], 1 + 2 + 3}}
		for k, s := range sets {
			if !s.ps.Included() {
				continue
			}
			wg.Go(func() {
				errs[k] = loop(ctx, g, func(x *hvd.Tensor) error {
					return s.ps.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{Postscale: 1.0 / 3})
				}, s.want/3)
			})
		}
		wg.Go(func() {
			errs[2] = loop(ctx, g, func(x *hvd.Tensor) error {
				return rt.Allreduce(ctx, x, kernels.Average, hvd.ReduceOptions{})
			}, 1.5)
		})
		wg.Wait()
		return errors.Join(errs...)
	})
}

// TestAddProcessSetInvalid: ranks that are unsorted, repeated, out of
// range or none fail AddProcessSet on every rank with ErrInvalidArgument,
// ranks that disagree fail it on every rank, and a valid set added after
// them works.
func TestAddProcessSetInvalid(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	for _, tc := range []struct {
		ranks []int
		want  string
	}{
		{[]int{2, 0}, "ascending order"},
		{[]int{0, 1, 1}, "rank 1 is given twice"},
		{[]int{0, 3}, "rank 3 is out of range"},
		{[]int{-1, 0}, "rank -1 is out of range"},
		{nil, "at least one rank"},
	} {
		hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
			ps, err := rt.AddProcessSet(context.Background(), tc.ranks)
			if ps != nil || !errors.Is(err, hvd.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				return fmt.Errorf("AddProcessSet(%v): %v, %v; want ErrInvalidArgument saying %q", tc.ranks, ps, err, tc.want)
			}
			return nil
		})
	}
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ranks := []int{0, 1}
		if rt.Rank() == 2 {
			ranks = []int{0, 2}
		}
		ps, err := rt.AddProcessSet(context.Background(), ranks)
		if ps != nil || err == nil || !strings.Contains(err.Error(), "rank 2 gives other ranks") {
			return fmt.Errorf("ranks that disagree: %v, %v", ps, err)
		}
		return nil
	})
	sets := addSet(t, rts, []int{0, 2})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ps := sets[rt.Rank()]
		if ps.ID() != 7 {
			return fmt.Errorf("the seventh set added has ID %d", ps.ID())
		}
		if !ps.Included() {
			return outsider(context.Background(), ps)
		}
		return setCollectives(context.Background(), ps, rt.Rank())
	})
}

// TestRemoveProcessSet: once removed, a set fails every operation with
// ErrProcessSetRemoved, a second removal says so too, and the other sets
// and the job still work.
func TestRemoveProcessSet(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	gone := addSet(t, rts, []int{0, 1})
	kept := addSet(t, rts, []int{1, 2})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		ctx, ps := context.Background(), gone[rt.Rank()]
		if err := rt.RemoveProcessSet(ctx, ps); err != nil {
			return err
		}
		x := hvd.NewTensor("x", []float64{1})
		if err := ps.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrProcessSetRemoved) {
			return fmt.Errorf("allreduce after removal: %v", err)
		}
		if _, err := ps.Allgather(ctx, x); !errors.Is(err, hvd.ErrProcessSetRemoved) {
			return fmt.Errorf("allgather after removal: %v", err)
		}
		if err := rt.RemoveProcessSet(ctx, ps); !errors.Is(err, hvd.ErrProcessSetRemoved) {
			return fmt.Errorf("second removal: %v", err)
		}
		if err := ps.Err(); err != nil {
			return fmt.Errorf("Err of a set removed in good order: %v", err)
		}
		if live := rt.ProcessSets(); len(live) != 1 || live[0] != kept[rt.Rank()] {
			return fmt.Errorf("live sets after removal: %v", live)
		}
		if kept[rt.Rank()].Included() {
			y := hvd.NewTensor("y", []int32{int32(rt.Rank())})
			if err := kept[rt.Rank()].Allreduce(ctx, y, kernels.Sum, hvd.ReduceOptions{}); err != nil {
				return err
			}
			if got := hvd.Values[int32](y)[0]; got != 3 {
				return fmt.Errorf("kept set: %d, want 3", got)
			}
		}
		return rt.Barrier(ctx)
	})
}

// TestProcessSetPeerDies: when rank 3's links of a set {1, 2, 3} fail as if
// it died, an all-reduce on the set fails on ranks 1 and 2 with
// ErrPeerGone naming rank 3, while the job's collectives among the
// living still run.
func TestProcessSetPeerDies(t *testing.T) {
	rts := hvdtest.Start(t, 4)
	sets := addSet(t, rts, []int{1, 2, 3})
	hvd.CrashProcessSet(sets[3], errors.New("rank 3 crashed"))
	hvdtest.Each(t, rts[1:3], func(rt *hvd.Runtime) error {
		x := hvd.NewTensor("x", make([]float32, 1000))
		err := sets[rt.Rank()].Allreduce(context.Background(), x, kernels.Sum, hvd.ReduceOptions{})
		if !errors.Is(err, hvd.ErrPeerGone) || !strings.Contains(err.Error(), "rank 3") {
			return fmt.Errorf("allreduce with rank 3 gone: %v; want ErrPeerGone naming rank 3", err)
		}
		t.Logf("rank %d: %v", rt.Rank(), err)
		if err := sets[rt.Rank()].Err(); !errors.Is(err, hvd.ErrPeerGone) {
			return fmt.Errorf("the set's Err with rank 3 gone: %v", err)
		}
		if err := rt.Err(); err != nil {
			return fmt.Errorf("the job's Err after the set failed: %v", err)
		}
		return nil
	})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		return rt.Allreduce(context.Background(), hvd.NewTensor("g", []int32{1}), kernels.Sum, hvd.ReduceOptions{})
	})
}

// TestProcessSetPeerShutdown: a rank that shuts down while its set has an
// operation in flight fails that operation on the set's other ranks with
// ErrPeerGone, and its own with ErrShutdown.
func TestProcessSetPeerShutdown(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	sets := addSet(t, rts, []int{0, 2})
	h := sets[0].AllreduceAsync(hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	if err := rts[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(context.Background()); !errors.Is(err, hvd.ErrPeerGone) {
		t.Errorf("rank 0's operation with rank 2 shut down: %v; want ErrPeerGone", err)
	}
	err := sets[2].Allreduce(context.Background(), hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	if !errors.Is(err, hvd.ErrProcessSetRemoved) {
		t.Errorf("rank 2's operation after its Shutdown: %v; want ErrProcessSetRemoved", err)
	}
	if _, err := rts[2].AddProcessSet(context.Background(), []int{0}); !errors.Is(err, hvd.ErrShutdown) {
		t.Errorf("AddProcessSet after Shutdown: %v; want ErrShutdown", err)
	}
}

// TestProcessSetUnderGorun: in a job joined through a rendezvous, as
// gorun's ranks join, a set's links form on the data-plane host with the
// job's secret, its collectives run, and when rank 3's links of set
// {1, 2, 3} fail, ranks 1 and 2 report to the launcher under the job's
// ranks (rank 3, not the set's rank 2), at least one of them naming 3.
func TestProcessSetUnderGorun(t *testing.T) {
	rts, srv := gorunJob(t, 4)
	sets := addSet(t, rts, []int{1, 2, 3})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		if ps := sets[rt.Rank()]; ps.Included() {
			return setCollectives(context.Background(), ps, rt.Rank())
		}
		return nil
	})
	hvd.CrashProcessSet(sets[3], errors.New("rank 3 crashed"))
	hvdtest.Each(t, rts[1:3], func(rt *hvd.Runtime) error {
		err := sets[rt.Rank()].Allreduce(context.Background(), hvd.NewTensor("x", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
		if !errors.Is(err, hvd.ErrPeerGone) {
			return fmt.Errorf("allreduce with rank 3 gone: %v", err)
		}
		// As on the job's own links, a rank may learn of the loss from
		// the other (a peer gone, or that rank's links closing as it
		// fails: gorun follows the chain); it names a job rank of the set,
		// never the set's rank 2, nor itself.
		other := strconv.Itoa(3 - rt.Rank())
		if v, ok := reported(srv, rt.Rank()); !ok || v != "3" && v != other && v != jobenv.PeerGone {
			return fmt.Errorf("reported %q (%v), want 3, %s or %s; the error: %v", v, ok, other, jobenv.PeerGone, err)
		}
		return nil
	})
	named := 0
	for r := 1; r <= 2; r++ {
		if v, _ := reported(srv, r); v == "3" {
			named++
		}
	}
	if named == 0 {
		t.Error("neither rank 1 nor rank 2 named rank 3 to the launcher")
	}
}

// TestProcessSetDistributedOptimizer: an optimizer wrapped for set {1, 2}
// of a job of 3 averages gradients over the set alone (rank 1's 1 and
// rank 2's 2 average to 1.5), and rank 0 cannot wrap one.
func TestProcessSetDistributedOptimizer(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	sets := addSet(t, rts, []int{1, 2})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		p := hvd.NewParam("w", 2)
		sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
		if err != nil {
			return err
		}
		opt, err := sets[rt.Rank()].NewDistributedOptimizer(sgd, hvd.DistributedOptions{})
		if rt.Rank() == 0 {
			if !errors.Is(err, hvd.ErrNotInProcessSet) {
				return fmt.Errorf("wrapping outside the set: %v", err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		p.Grad[0], p.Grad[1] = float64(rt.Rank()), 4
		if err := opt.Step(context.Background()); err != nil {
			return err
		}
		if p.Value[0] != -1.5 || p.Value[1] != -4 {
			return fmt.Errorf("values after one step: %v, want [-1.5 -4]", p.Value)
		}
		return nil
	})
}

// TestConfigProcessSets: the sets of Config.ProcessSets exist, numbered in
// order, once NewRuntime returns (here over a loopback TCP mesh), and a
// list that is not a valid set fails the start on every rank.
func TestConfigProcessSets(t *testing.T) {
	lists := [][]int{{0, 1}, {1, 2}}
	rts := hvdtest.Start(t, 3, hvdtest.OverTCP(), hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.ProcessSets = lists }))
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		sets := rt.ProcessSets()
		if len(sets) != 2 {
			return fmt.Errorf("%d sets, want 2", len(sets))
		}
		for i, ps := range sets {
			if ps.ID() != i+1 || !slices.Equal(ps.Ranks(), lists[i]) {
				return fmt.Errorf("set %d is %v", i+1, ps)
			}
			if !ps.Included() {
				if err := outsider(context.Background(), ps); err != nil {
					return err
				}
				continue
			}
			if err := setCollectives(context.Background(), ps, rt.Rank()); err != nil {
				return fmt.Errorf("%v: %w", ps, err)
			}
		}
		return nil
	})
	err := hvdtest.Run(2, func(*hvd.Runtime) error { return nil },
		hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.ProcessSets = [][]int{{1, 0}} }))
	if !errors.Is(err, hvd.ErrInvalidArgument) || !strings.Contains(err.Error(), "ascending") {
		t.Errorf("starting with process set [1 0]: %v; want ErrInvalidArgument", err)
	}
	// Without Config.ProcessSets, the knob (GOROVOD_PROCESS_SETS, gorun's
	// --process-sets) names the sets; a knob that does not parse fails the
	// start.
	err = hvdtest.Run(3, func(rt *hvd.Runtime) error {
		sets := rt.ProcessSets()
		if len(sets) != 2 || !slices.Equal(sets[0].Ranks(), []int{0, 2}) || !slices.Equal(sets[1].Ranks(), []int{1}) {
			return fmt.Errorf("sets %v, want [0 2] and [1]", sets)
		}
		if sets[0].Included() {
			return setCollectives(context.Background(), sets[0], rt.Rank())
		}
		return nil
	}, hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.Knobs.ProcessSets = "0,2;1" }))
	if err != nil {
		t.Errorf("sets from the knob: %v", err)
	}
	err = hvdtest.Run(2, func(*hvd.Runtime) error { return nil },
		hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.Knobs.ProcessSets = "0;;1" }))
	if !errors.Is(err, hvd.ErrInvalidArgument) {
		t.Errorf("starting with the knob \"0;;1\": %v; want ErrInvalidArgument", err)
	}
}

// TestProcessSetStallBounded: when rank 1 never submits the tensor that
// rank 0 submits to their set, rank 0's operation fails with ErrStall
// once the op timeout has passed, naming the job's rank 1; nothing waits
// forever.
func TestProcessSetStallBounded(t *testing.T) {
	rts := hvdtest.Start(t, 3, hvdtest.WithConfig(func(cfg *hvd.Config) { cfg.OpTimeout = 300 * time.Millisecond }))
	sets := addSet(t, rts, []int{1, 2})
	err := sets[2].Allreduce(context.Background(), hvd.NewTensor("lonely", []float32{1}), kernels.Sum, hvd.ReduceOptions{})
	if !errors.Is(err, hvd.ErrStall) || !strings.Contains(err.Error(), "lonely") || !strings.Contains(err.Error(), "set rank 0 is rank 1") {
		t.Errorf("an all-reduce that rank 1 never submits: %v; want ErrStall naming it and rank 1", err)
	}
	t.Log(err)
}

// TestRemoveProcessSetLeavesNothing: adding a set, using it and removing
// it leaves no goroutine and no file descriptor behind while the job's
// runtimes keep running.
func TestRemoveProcessSetLeavesNothing(t *testing.T) {
	rts := hvdtest.Start(t, 3)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error { return rt.Barrier(context.Background()) })
	before := goleak.IgnoreCurrent()
	fds := openFDs(t)
	sets := addSet(t, rts, []int{0, 1, 2})
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		if err := setCollectives(context.Background(), sets[rt.Rank()], rt.Rank()); err != nil {
			return err
		}
		return rt.RemoveProcessSet(context.Background(), sets[rt.Rank()])
	})
	goleak.VerifyNone(t, before)
	// The set's sockets close before RemoveProcessSet returns; the wait
	// only spares a loaded machine a false alarm.
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > fds && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := openFDs(t); got > fds {
		t.Errorf("%d file descriptors open after removing the set, %d before adding it", got, fds)
	}
}
