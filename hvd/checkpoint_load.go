package hvd

import (
	"context"
	"fmt"
	"log/slog"
)

// Latest reads the newest valid checkpoint of Dir on this machine, skipping
// (and logging) damaged ones. It returns nil and an empty path when there
// is none.
func (c *Checkpointer) Latest() (*Checkpoint, string, error) {
	files, err := c.list()
	if err != nil {
		return nil, "", err
	}
	for _, f := range files {
		ck, err := ReadCheckpoint(f)
		if err == nil {
			return ck, f, nil
		}
		c.logger().Warn("hvd: skipping a damaged checkpoint", "path", f, "err", err)
	}
	return nil, "", nil
}

func (c *Checkpointer) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// loaded is what rank 0 sends the others in LoadLatest.
type loaded struct {
	Found bool
	Path  string
	Err   string
	Ck    Checkpoint
}

// LoadLatest returns rank 0's newest valid checkpoint on every rank of rt
// (nil: the default runtime), or nil when rank 0 has none. Only rank 0
// reads the directory (the other ranks may run on hosts that cannot see
// it); the checkpoint reaches them through a broadcast. It is collective.
func (c *Checkpointer) LoadLatest(ctx context.Context, rt *Runtime) (*Checkpoint, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	var l loaded
	if rt.Rank() == 0 {
		ck, path, err := c.Latest()
		switch {
		case err != nil:
			l.Err = err.Error()
		case ck != nil:
			l.Found, l.Path, l.Ck = true, path, *ck
		}
	}
	if err := BroadcastObject(ctx, rt, &l, 0); err != nil {
		return nil, err
	}
	if l.Err != "" {
		return nil, fmt.Errorf("hvd: rank 0 could not load a checkpoint: %s", l.Err)
	}
	if !l.Found {
		return nil, nil
	}
	c.logger().Debug("hvd: resuming from a checkpoint", "path", l.Path, "step", l.Ck.Step)
	return &l.Ck, nil
}
