// Command crashrank is a rank for gorun's tests of which failed rank it
// names: every rank all-reduces in a loop, and the rank -rank fails at
// step -step the way -mode says, while the others fail because it did.
//
//	exit7   os.Exit(7)
//	panic   an unrecovered panic (status 2)
//	segv    a nil pointer write with GOTRACEBACK=crash (killed by SIGABRT)
//	sigkill kills itself with SIGKILL
//	error   returns an error, as on a full disk (status 1)
//	early   exits 0 at once, without calling hvd.Init
//
// Every rank defers hvd.Shutdown and exits 1 when its loop fails, as a
// training program does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

var (
	mode = flag.String("mode", "exit7", "how the failing rank fails")
	bad  = flag.Int("rank", 1, "the rank that fails")
	at   = flag.Int("step", 20, "the step at which it fails")
)

func main() {
	flag.Parse()
	rank, _ := strconv.Atoi(os.Getenv("GOROVOD_RANK"))
	if rank == *bad && *mode == "early" {
		os.Exit(0)
	}
	if *mode == "segv" {
		debug.SetTraceback("crash")
	}
	if err := run(rank); err != nil {
		fmt.Fprintln(os.Stderr, "crashrank:", err)
		os.Exit(1)
	}
}

func run(rank int) error {
	ctx := context.Background()
	if err := hvd.Init(ctx); err != nil {
		return err
	}
	defer hvd.Shutdown()
	data := make([]float32, 100_000) // large enough for the pipelined executor
	for step := 0; ; step++ {
		if rank == *bad && step == *at {
			if err := fail(); err != nil {
				return err
			}
		}
		x := hvd.NewTensor("x", data)
		if err := hvd.Allreduce(ctx, x, kernels.Sum, hvd.ReduceOptions{}); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
}

// fail fails this rank the way -mode says.
func fail() error {
	switch *mode {
	case "exit7":
		os.Exit(7)
	case "panic":
		panic("crashrank: boom")
	case "segv":
		var p *int
		*p = 1
	case "sigkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "error":
		return fmt.Errorf("writing a checkpoint: %w", syscall.ENOSPC)
	}
	return fmt.Errorf("unknown -mode %q", *mode)
}
