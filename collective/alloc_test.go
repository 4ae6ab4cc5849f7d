package collective_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestSmallOpsAllocateNothing: once its plan is cached, a small all-reduce
// or broadcast allocates nothing on any rank, over TCP and shared memory
// (memtransport, for tests, copies each message into a new slice). A
// per-operation allocation is garbage at the rate of the operations, and
// the heap it grows faults in fresh pages: on the 2-CPU test VM, four
// ranks' 4 KiB all-reduces over shared memory, the first size of a
// launch, with the rings' pages in place, took 46-60 µs while a run and a
// closure were allocated per call and 22-30 µs without (Open MPI 62).
func TestSmallOpsAllocateNothing(t *testing.T) {
	for _, k := range []meshtest.Kind{{Name: "tcp", Make: meshtest.TCP}, {Name: "shm", Make: meshtest.Shm}} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/n%d", k.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, k.Make, n, collective.Options{})
				bufs := make([][]float32, n)
				for r := range bufs {
					bufs[r] = make([]float32, 1024)
				}
				ctx := context.Background()
				// Ranks 1..n-1 run in goroutines that live through the
				// measurement, stepped through channels (which allocate
				// nothing), so that only the operations are counted.
				step, done := make(chan int), make(chan error)
				for r := 1; r < n; r++ {
					go func() {
						for op := range step {
							done <- call(ctx, cs[r], bufs[r], op)
						}
					}()
				}
				defer close(step)
				run := func(op int) {
					for r := 1; r < n; r++ {
						step <- op
					}
					if err := call(ctx, cs[0], bufs[0], op); err != nil {
						t.Fatal(err)
					}
					for r := 1; r < n; r++ {
						if err := <-done; err != nil {
							t.Fatal(err)
						}
					}
				}
				for op := range 2 {
					run(op) // plans, scratch and the spare run made here
					allocs := testing.AllocsPerRun(200, func() { run(op) })
					if allocs != 0 {
						t.Errorf("op %d: %.0f allocations per operation of %d ranks, want 0", op, allocs, n)
					}
				}
			})
		}
	}
}

// call runs operation op on c: 0 an all-reduce of buf, 1 a broadcast of
// it from rank 0.
func call(ctx context.Context, c *collective.Comm, buf []float32, op int) error {
	if op == 0 {
		return collective.Allreduce(ctx, c, buf, kernels.Sum, collective.ReduceOptions{})
	}
	return collective.Broadcast(ctx, c, buf, 0)
}
