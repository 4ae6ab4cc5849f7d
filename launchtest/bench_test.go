package launchtest

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testslurm"
)

// mpiHello builds examples/hello/peers/mpi_hello.c (MPI's start-to-exit
// reference) with MPICH's compiler, or skips b. (Debian's Open MPI
// direct-launched by srun needs Slurm's PMIx plugin, which cannot run two
// nodes that share one /tmp, as the emulated ones do; MPICH speaks
// Slurm's PMI-2.)
func mpiHello(b *testing.B) string {
	b.Helper()
	src, err := filepath.Abs("../examples/hello/peers/mpi_hello.c")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		b.Skip("mpicc.mpich is not installed (apt-get install libmpich-dev)")
	}
	out := filepath.Join(filepath.Dir(bin(b, "hello")), "mpi_hello")
	if msg, err := exec.Command("mpicc.mpich", "-O2", "-o", out, src).CombinedOutput(); err != nil {
		b.Fatalf("mpicc: %v\n%s", err, msg)
	}
	return out
}

// BenchmarkStartToExit times a 4-rank hello from start to exit three ways,
// in turn, on a two-node Slurm cluster: gorovod's hello under
// srun -N 2 -n 4, MPI's hello (MPICH) under srun --mpi=pmi2
// -N 2 -n 4, and gorovod's hello under gorun -np 4 on this host. It
// reports each one's median in ms and the median of the differences
// between the two srun starts taken in the same round.
//
//	go test -run '^$' -bench StartToExit -benchtime 20x ./launchtest
func BenchmarkStartToExit(b *testing.B) {
	c := testslurm.Start(b, 2, 2)
	hello, mpi, gorun := bin(b, "hello"), mpiHello(b), bin(b, "gorun")
	ctx := context.Background()
	variants := []struct {
		name string
		cmd  func(ctx context.Context) *exec.Cmd
		want string
	}{
		{"srun-gorovod", func(ctx context.Context) *exec.Cmd { return c.Command(ctx, "srun", "-N", "2", "-n", "4", hello) }, "size=4 sum=10"},
		{"srun-mpi", func(ctx context.Context) *exec.Cmd {
			return c.Command(ctx, "srun", "--mpi=pmi2", "-N", "2", "-n", "4", mpi)
		}, "size=4 sum=10"},
		{"gorun", func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, gorun, "-np", "4", hello) }, "size=4 sum=10"},
	}
	times := make([][]time.Duration, len(variants))
	failures := make([]int, len(variants))
	// once runs variant i until it succeeds within 20 s. A failed run is
	// counted (reported as failed-NAME) and tried again, up to 5 times;
	// only successful runs are timed. MPICH's UCX start sometimes fails
	// between the emulated nodes, which share one kernel and boot id.
	once := func(i int) time.Duration {
		for {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			start := time.Now()
			out, err := variants[i].cmd(ctx).CombinedOutput()
			d := time.Since(start)
			cancel()
			if err == nil && strings.Contains(string(out), variants[i].want) {
				return d
			}
			if failures[i]++; failures[i] > 5 {
				b.Fatalf("%s: %v\n%s", variants[i].name, err, out)
			}
		}
	}
	for i := range variants { // warm-up: page cache, slurmd's first step
		once(i)
	}
	b.ResetTimer()
	var diff []time.Duration
	for range b.N {
		for i := range variants {
			times[i] = append(times[i], once(i))
		}
		diff = append(diff, times[0][len(times[0])-1]-times[1][len(times[1])-1])
	}
	b.StopTimer()
	for i, v := range variants {
		b.ReportMetric(median(times[i]), "ms-"+v.name)
	}
	b.ReportMetric(median(diff), "ms-srun-over-mpi")
	for i, v := range variants {
		if failures[i] > 0 {
			b.ReportMetric(float64(failures[i]), "failed-"+v.name)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// median returns the median of d in milliseconds.
func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
