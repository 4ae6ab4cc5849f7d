// Command elasticrank is the rank program of the elastic launcher tests:
// it trains, through hvd.RunElastic, a model that sums the samples it
// processes (w[0]), their squares (w[1]) and their count (w[2]) with an
// all-reduce that sums, so that the final parameters show whether every
// sample of every epoch was processed exactly once.
//
// The workers named in ELASTIC_DIE (a comma-separated list) kill
// themselves with SIGKILL after the update of step ELASTIC_DIE_STEP, before
// committing it (printing the time first). The worker named in
// ELASTIC_DIE_IN_SYNC kills itself while it decodes rank 0's state for the
// ELASTIC_DIE_IN_SYNC_AT-th time (a Sync of the state, or a Restore,
// decodes it). A step sleeps ELASTIC_STEP_MS milliseconds (default 5).
// Every worker prints the time of its first step after each formation,
// and the final rank 0 the parameters.
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

const samples, batch, epochs = 600, 4, 2

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "elasticrank:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	cfg, err := hvd.ElasticConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	dieAt, _ := strconv.Atoi(os.Getenv("ELASTIC_DIE_STEP"))
	stepTime := 5 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("ELASTIC_STEP_MS")); err == nil {
		stepTime = time.Duration(ms) * time.Millisecond
	}
	die := slices.Contains(strings.Split(os.Getenv("ELASTIC_DIE"), ","), cfg.ID)
	p := hvd.NewParam("w", 3)
	sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
	if err != nil {
		return err
	}
	sampler, err := hvd.NewElasticSampler(samples, batch, 11, true)
	if err != nil {
		return err
	}
	progress := &struct{ Steps int }{}
	probe := &syncProbe{}
	if os.Getenv("ELASTIC_DIE_IN_SYNC") == cfg.ID {
		dieInDecoding, _ = strconv.Atoi(os.Getenv("ELASTIC_DIE_IN_SYNC_AT"))
	}
	state, err := hvd.NewElasticState(sgd, sampler, progress, probe)
	if err != nil {
		return err
	}
	var final *hvd.Runtime
	err = hvd.RunElastic(ctx, cfg, state, func(ctx context.Context, rt *hvd.Runtime) error {
		opt, err := hvd.NewDistributedOptimizer(sgd, rt, hvd.DistributedOptions{Op: kernels.Sum})
		if err != nil {
			return err
		}
		first := true
		for sampler.Epoch < epochs {
			for sampler.StepsLeft(rt.Size()) > 0 {
				var s, s2, n float64
				for _, i := range sampler.Batch(rt.Rank(), rt.Size()) {
					x := float64(i + 1)
					s, s2, n = s+x, s2+x*x, n+1
				}
				p.Grad[0], p.Grad[1], p.Grad[2] = -s, -s2, -n
				if err := opt.Step(ctx); err != nil {
					return err
				}
				sampler.Advance(rt.Size())
				progress.Steps++
				if first {
					fmt.Printf("first step of a formation of %d ranks at %d\n", rt.Size(), time.Now().UnixNano())
					first = false
				}
				// Before the commit, which could see a newer generation
				// (another worker died first) and reset this one instead:
				// every worker named dies after the same update.
				if die && progress.Steps == dieAt {
					fmt.Printf("dying at %d\n", time.Now().UnixNano())
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				if err := state.Commit(); err != nil {
					return err
				}
				time.Sleep(stepTime) // a step of compute
			}
			sampler.NextEpoch()
			if err := state.Commit(); err != nil {
				return err
			}
		}
		final = rt
		return nil
	})
	if err != nil {
		return err
	}
	if final.Rank() == 0 {
		fmt.Printf("sums %v %v %v after %d steps\n", p.Value[0], p.Value[1], p.Value[2], progress.Steps)
	}
	return nil
}

// syncProbe is a field of the elastic state that kills its worker while
// the state is being decoded for the dieInDecoding-th time (0: never).
// The counts live outside it: decoding zeroes the field first.
type syncProbe struct{}

var decoded, dieInDecoding int

// GobEncode implements gob.GobEncoder: the probe carries nothing.
func (p *syncProbe) GobEncode() ([]byte, error) { return []byte{0}, nil }

// GobDecode implements gob.GobDecoder.
func (p *syncProbe) GobDecode([]byte) error {
	decoded++
	if decoded == dieInDecoding {
		fmt.Printf("dying in the state's decoding #%d at %d\n", decoded, time.Now().UnixNano())
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return nil
}
