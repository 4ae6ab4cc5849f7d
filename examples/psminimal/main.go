// Command psminimal is the README's parameter-server program, whole: a
// line fitted by asynchronous SGD, its two parameters kept on parameter
// servers. The chief schedules one step per batch; whichever worker is free
// runs it: it pulls the parameters, computes the batch's gradient and
// pushes it, and the servers apply it.
//
//	go build -o bin/ ./cmd/gorun ./examples/psminimal
//	bin/gorun --ps 1 -np 2 bin/psminimal
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/gorovod/gorovod/ps"
)

const batch = 32

func main() {
	// The data: 4096 points of y = 3x - 1 plus noise, the same in every process.
	rng := rand.New(rand.NewPCG(1, 2))
	xs, ys := make([]float64, 4096), make([]float64, 4096)
	for i := range xs {
		xs[i] = rng.Float64()*2 - 1
		ys[i] = 3*xs[i] - 1 + 0.1*rng.NormFloat64()
	}

	// A step, run on a worker: train on batch number args, return its loss.
	train := func(ctx context.Context, w *ps.WorkerContext, args []byte) ([]byte, error) {
		v := map[string][]float64{}
		if _, err := w.Client.Pull(ctx, v); err != nil {
			return nil, err
		}
		g, loss := map[string][]float64{"w": {0}, "b": {0}}, 0.0
		for i := range batch {
			j := int(binary.LittleEndian.Uint32(args))*batch + i
			d := v["w"][0]*xs[j] + v["b"][0] - ys[j]
			loss += d * d / batch
			g["w"][0] += 2 * d * xs[j] / batch
			g["b"][0] += 2 * d / batch
		}
		return binary.LittleEndian.AppendUint64(nil, math.Float64bits(loss)), w.Client.Push(ctx, g)
	}

	// The chief: create the variables on the servers, then schedule each
	// epoch's steps and wait for their results.
	chief := func(ctx context.Context, c *ps.Chief) error {
		vars := []ps.Variable{{Name: "w", Shape: []int{1}, Value: []float64{0}}, {Name: "b", Shape: []int{1}, Value: []float64{0}}}
		part, _ := ps.MinSizePartitioner(256<<10, c.Servers())
		if err := c.Client.Create(ctx, vars, part, ps.Optimizer{Kind: "sgd", LR: 0.1}); err != nil {
			return err
		}
		for epoch := range 5 {
			steps := make([]*ps.RemoteValue, len(xs)/batch)
			for i := range steps {
				steps[i] = c.Schedule("train", binary.LittleEndian.AppendUint32(nil, uint32(i)))
			}
			loss := 0.0
			for _, s := range steps {
				b, err := s.Wait(ctx)
				if err != nil {
					return err
				}
				loss += math.Float64frombits(binary.LittleEndian.Uint64(b)) / float64(len(steps))
			}
			v := map[string][]float64{}
			step, err := c.Client.Pull(ctx, v)
			if err != nil {
				return err
			}
			fmt.Printf("epoch %d: loss %.4f, w = %.3f, b = %.3f (%d workers)\n", epoch+1, loss, v["w"][0], v["b"][0], c.Workers())
			c.LogScalars(step, map[string]float64{"loss": loss, "w": v["w"][0], "b": v["b"][0]}) // for gorun --dashboard
		}
		return nil
	}

	// Every process runs this; the job gives it its part (chief, worker or server).
	err := ps.Run(context.Background(), ps.Program{Steps: map[string]ps.StepFunc{"train": train}, Chief: chief})
	if err != nil {
		log.Fatal(err)
	}
}
