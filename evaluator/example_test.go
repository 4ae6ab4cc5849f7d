package evaluator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/gorovod/gorovod/evaluator"
	"github.com/gorovod/gorovod/hvd"
)

func Example() {
	dir, err := os.MkdirTemp("", "evaluator-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The training side: two checkpoints of a one-parameter model.
	ckpts := &hvd.Checkpointer{Dir: dir}
	for _, step := range []int64{100, 200} {
		ck := &hvd.Checkpoint{Epoch: int(step / 100), Step: step, Params: map[string][]float64{"w": {float64(step) / 400}}}
		if err := hvd.WriteCheckpoint(ckpts.Path(step), ck); err != nil {
			log.Fatal(err)
		}
	}

	// The evaluator: its loss is (w-1)², until the checkpoint of step 200.
	pr, pw := io.Pipe()
	go func() {
		_, err := evaluator.Run(context.Background(), evaluator.Options{
			Dir: dir,
			Eval: func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) {
				w := ck.Params["w"][0]
				return map[string]float64{"loss": (w - 1) * (w - 1)}, nil
			},
			Out:       pw,
			FinalStep: 200,
			Logger:    slog.New(slog.DiscardHandler),
		})
		pw.CloseWithError(err)
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		var r evaluator.Result
		if err := json.Unmarshal(lines.Bytes(), &r); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("step %d epoch %d loss %.4f (%s)\n", r.Step, r.Epoch, r.Metrics["loss"], r.File)
	}
	if err := lines.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// step 100 epoch 1 loss 0.5625 (checkpoint-000000000100.ckpt)
	// step 200 epoch 2 loss 0.2500 (checkpoint-000000000200.ckpt)
}
