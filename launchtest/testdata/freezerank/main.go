// Command freezerank is the rank program of the launcher's tests of a rank
// that stops answering: every rank all-reduces a small tensor step after
// step, and the rank named in FREEZE_RANK stops itself with SIGSTOP before
// step FREEZE_STEP (default 3), as a rank stuck in a debugger, swapped out
// or frozen by a cgroup would. The other ranks then wait for it until
// their op timeout (or stall shutdown time) and fail. With FREEZE_VIA=comm
// the steps are all-reduces on the runtime's communicator itself
// (Runtime.Comm), not negotiated by the engine, as a benchmark or a tool
// runs them.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// steps bounds the loop: without a frozen rank the program ends.
const steps = 1000

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "freezerank:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	freeze, err := strconv.Atoi(os.Getenv("FREEZE_RANK"))
	if err != nil {
		return fmt.Errorf("FREEZE_RANK: %w", err)
	}
	at := 3
	if s := os.Getenv("FREEZE_STEP"); s != "" {
		if at, err = strconv.Atoi(s); err != nil {
			return fmt.Errorf("FREEZE_STEP: %w", err)
		}
	}
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	var comm *collective.Comm
	if os.Getenv("FREEZE_VIA") == "comm" {
		comm = hvd.Default().Comm()
	}
	for step := range steps {
		if step == at && hvd.Rank() == freeze {
			fmt.Printf("rank %d stops itself at step %d\n", hvd.Rank(), step)
			if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
				return err
			}
			// The stop may take hold of every thread a moment after
			// kill returns: go no further meanwhile.
			time.Sleep(time.Minute)
		}
		got, err := allreduce(ctx, comm, float32(hvd.Rank()+1))
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if n := hvd.Size(); got != float32(n*(n+1)/2) {
			return fmt.Errorf("step %d: sum %v, want %v", step, got, n*(n+1)/2)
		}

	}
	return nil
}

// allreduce sums v over the ranks: through the engine, or with comm on the
// communicator directly.
func allreduce(ctx context.Context, comm *collective.Comm, v float32) (float32, error) {
	if comm != nil {
		buf := []float32{v}
		err := collective.Allreduce(ctx, comm, buf, kernels.Sum, collective.ReduceOptions{})
		return buf[0], err
	}
	x := hvd.NewTensor("x", []float32{v})
	if err := hvd.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
		return 0, err
	}
	return hvd.Values[float32](x)[0], nil
}
