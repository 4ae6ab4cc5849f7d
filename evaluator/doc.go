// Package evaluator is a sidecar evaluator, in the manner of TensorFlow's
// SidecarEvaluator: a process beside a training job that follows the job's
// checkpoint directory and evaluates each checkpoint as it appears, so that
// the training ranks spend no time on evaluation.
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	sum, err := evaluator.Run(ctx, evaluator.Options{
//		Dir:       "ckpt", // the training's hvd.Checkpointer.Dir
//		Eval:      func(ctx context.Context, ck *hvd.Checkpoint) (map[string]float64, error) { ... },
//		Out:       os.Stdout, // one JSON line per evaluation
//		FinalStep: 10000,
//	})
//
// Run reads only the directory, with hvd.ReadCheckpoint, so it works beside
// any training that writes its checkpoints through hvd.Checkpointer or
// hvd.WriteCheckpoint (all-reduce or parameter-server training alike), on a
// machine that sees rank 0's directory (the same host or a shared file
// system). It may start before the training: a directory that does not
// exist yet, or holds no checkpoint yet, is waited for. Eval typically
// restores the checkpoint into a model of its own (Checkpoint.Restore) and
// computes metrics on held-out data.
//
// # Which checkpoints
//
// Every Poll (1 s by default) and at once after each evaluation, Run lists
// the directory and evaluates the lowest step it has not evaluated yet; a
// checkpoint written while another is evaluated is therefore the next one.
// Only regular files whose names hvd.CheckpointStep accepts count;
// temporary files of a save in progress and foreign files are ignored.
//
// Each step is evaluated exactly once: Run remembers the evaluated steps,
// not file names, so a checkpoint rewritten for a step already evaluated (a
// training that resumed from an older checkpoint and saved the same step
// again) is not evaluated again. A step that appears after a higher one was
// evaluated is still evaluated (once). The memory for this is a few bytes
// per evaluated checkpoint.
//
// A damaged file (bad checksum, truncated, no checkpoint header: what
// hvd.ReadCheckpoint rejects as hvd.ErrBadCheckpoint) is logged at WARN once
// and passed over while it stays as it is (the same inode, size and
// modification time); once it is rewritten (hvd.WriteCheckpoint renames a
// new file over it) or grows (a copy in progress), it is read again and
// evaluated if whole. A file that cannot be read for another reason
// (permissions, I/O) is retried at each listing and logged when its error
// changes. Reading is bounded as hvd.ReadCheckpoint bounds it.
//
// A checkpoint that the training removes before Run reads it (a
// Checkpointer with Keep prunes the oldest on each save) is skipped with an
// INFO log when Run saw it listed, and never seen at all otherwise: an
// evaluator slower than Keep saves lags behind and misses checkpoints. Set
// Keep large enough for the evaluation's pace (or 0, keeping all) when
// every checkpoint must be evaluated.
//
// # When it stops
//
// Run returns a Summary and a nil error when ctx ends (wire a signal
// through signal.NotifyContext; an evaluation in progress sees it through
// Eval's ctx, and one that then returns an error is not counted), after it has evaluated a checkpoint
// at or past Options.FinalStep (not necessarily exactly that step: the
// training may save every few steps), or after Options.MaxEvaluations
// evaluations; Summary.Stopped says which. An error from Eval (while ctx
// lives) stops Run with an error that names the checkpoint's step and wraps
// Eval's: a model that does not fit its checkpoints will not fit the next
// ones either, and a silent gap in the results would be worse. Errors
// writing Out stop it too.
//
// # Output
//
// Each evaluation is written to Options.Out as one JSON line, a Result:
//
//	{"step":200,"epoch":1,"metrics":{"accuracy":0.93,"loss":0.21},"time":"2026-11-28T00:10:03.123456789Z","seconds":0.84,"file":"checkpoint-000000000200.ckpt"}
//
// step is the checkpoint's step (its file name's), epoch its Epoch,
// metrics what Eval returned (a non-finite value as the string "NaN",
// "+Inf" or "-Inf"), time when the evaluation ended (UTC), seconds how long
// Eval took and file the checkpoint's file name.
package evaluator
