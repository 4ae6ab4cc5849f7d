package hvd

import (
	"context"
	"fmt"
	"log/slog"
)

// The whole optimizer state of a sharded DistributedOptimizer: gathered
// from the ranks' parts (State, GatherState), and loaded part by part
// (SetState).

// gatherState all-gathers every slot's pieces into the whole state.
func (z *zeroState) gatherState(ctx context.Context) (OptimizerState, error) {
	if z.err != nil {
		return OptimizerState{}, z.err
	}
	local := z.shard.State()
	out := OptimizerState{Steps: local.Steps, LR: local.LR, Slots: map[string][]float64{}}
	type part struct {
		prefix string
		b      *zeroBucket
	}
	var parts []part
	var ts []*Tensor
	for _, prefix := range z.template.slotPrefixes() {
		for _, b := range z.buckets {
			mine := make([]float64, b.hi-b.lo)
			for _, pc := range b.pieces {
				copy(mine[pc.at:], local.Slots[prefix+pc.p.Name])
			}
			parts = append(parts, part{prefix, b})
			ts = append(ts, NewTensor("zero.state/"+prefix+b.params[0].Name, mine))
		}
	}
	if z.rt.Size() > 1 && len(ts) > 0 {
		var err error
		if ts, err = z.rt.GroupedAllgather(ctx, ts); err != nil {
			return OptimizerState{}, err
		}
	}
	for i, pt := range parts {
		whole := Values[float64](ts[i])
		if len(whole) != pt.b.n {
			return OptimizerState{}, fmt.Errorf("hvd: ShardState: gathered %d of %d values of slot %q", len(whole), pt.b.n, pt.prefix)
		}
		for j, p := range pt.b.params {
			out.Slots[pt.prefix+p.Name] = whole[pt.b.offs[j] : pt.b.offs[j]+p.Len() : pt.b.offs[j]+p.Len()]
		}
	}
	return out, nil
}

// state is gatherState for the Optimizer interface, which has no error:
// a failed gather is logged and gives a state without slots, which
// SetState (and so Checkpoint.Restore) refuses.
func (z *zeroState) state() OptimizerState {
	st, err := z.gatherState(context.Background())
	if err != nil {
		slog.Error("hvd: gathering the sharded optimizer state", "err", err)
		if z.shard == nil {
			return OptimizerState{}
		}
		steps, lr := z.shard.scalars()
		return OptimizerState{Steps: steps, LR: lr}
	}
	return st
}

// setState loads this rank's pieces of the whole state s.
func (z *zeroState) setState(s OptimizerState) error {
	if z.err != nil {
		return z.err
	}
	want := 0
	for _, prefix := range z.template.slotPrefixes() {
		for _, b := range z.buckets {
			for _, p := range b.params {
				v, ok := s.Slots[prefix+p.Name]
				switch {
				case !ok:
					return fmt.Errorf("%w: slot %q is missing", ErrOptimizerState, prefix+p.Name)
				case len(v) != p.Len():
					return fmt.Errorf("%w: slot %q has %d values, want %d", ErrOptimizerState, prefix+p.Name, len(v), p.Len())
				}
				want++
			}
		}
	}
	if len(s.Slots) != want {
		return fmt.Errorf("%w: %d slots, want %d", ErrOptimizerState, len(s.Slots), want)
	}
	mine := OptimizerState{Steps: s.Steps, LR: s.LR, Slots: map[string][]float64{}}
	for _, prefix := range z.template.slotPrefixes() {
		for _, b := range z.buckets {
			for _, pc := range b.pieces {
				mine.Slots[prefix+pc.p.Name] = s.Slots[prefix+pc.p.Name][pc.a : pc.a+pc.view.Len()]
			}
		}
	}
	return z.shard.SetState(mine)
}

// GatherState returns the whole optimizer state: with ShardState it
// all-gathers every rank's part of each slot, so that the result equals
// the state of the same optimizer unsharded, and every rank must call it
// at the same point of training; without, it is State. State calls it
// with context.Background() (NewCheckpoint, BroadcastOptimizerState and
// ElasticState use State), so with ShardState those are collective too.
func (o *DistributedOptimizer) GatherState(ctx context.Context) (OptimizerState, error) {
	if o.zero == nil {
		return o.inner.State(), nil
	}
	return o.zero.gatherState(ctx)
}

// StateBytes is the memory this rank's optimizer state takes: 8 bytes per
// value of its slots (momentum, moments). With ShardState only this
// rank's part is kept, about 1/size of the whole. An optimizer of another
// package counts 0 unless it has a StateBytes method of its own.
func (o *DistributedOptimizer) StateBytes() int64 {
	var opt Optimizer = o.inner
	if o.zero != nil && o.zero.shard != nil {
		opt = o.zero.shard
	}
	if s, ok := opt.(interface{ StateBytes() int64 }); ok {
		return s.StateBytes()
	}
	return 0
}
