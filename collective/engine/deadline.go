package engine

import (
	"context"
	"time"

	"github.com/gorovod/gorovod/collective/internal/deadline"
)

// opDeadline bounds each of the engine's data collectives by OpTimeout
// with one re-armed clock (see deadline.Clock) instead of a
// context.WithTimeout each. Only the holder of the turn uses it.
type opDeadline struct {
	limit time.Duration // OpTimeout; 0: no bound
	clock deadline.Clock
}

// arm starts the clock of one operation under ctx (the engine's) and
// returns the context it runs under; disarm stops the clock.
func (d *opDeadline) arm(ctx context.Context) context.Context {
	if d.limit <= 0 {
		return ctx
	}
	return d.clock.Arm(ctx, d.limit)
}

func (d *opDeadline) disarm() { d.clock.Disarm() }

// release frees the clock when the engine stops.
func (d *opDeadline) release() { d.clock.Release() }
