package hvd

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// ErrElasticState reports a misuse of an ElasticState: no optimizer, or a
// field that is not a non-nil pointer to a gob-encodable value.
var ErrElasticState = errors.New("hvd: elastic state")

// ElasticState is the training state that an elastic job rolls back to
// when it loses a rank and carries over to the ranks that join it, in the
// manner of Horovod Elastic's state objects: the parameters and the
// optimizer state (step count, learning rate, momentum and moments) of an
// optimizer, and fields of the caller's (each a non-nil pointer to a
// gob-encodable value: the epoch, the batch, an ElasticSampler).
//
// Commit saves all of it in memory on this rank; Restore brings the last
// commit back; Sync makes every rank's state rank 0's, as a job that has
// just been formed anew needs. Commit at the end of a step on every rank
// (Commits counts them), as often as a lost step may cost: a step after
// the last commit is done again after a reset.
//
// Commit copies the fields at once, and the parameter values and the
// optimizer's buffers in a background goroutine when the optimizer is
// this package's (SGD, Adam, or a DistributedOptimizer wrapping one): the
// forward and backward passes of the next step only read them, and the
// optimizer's Step and SetState, and this state's Restore and Sync, wait
// for the copy before they write. Do not write the values otherwise (by
// hand, BroadcastParameters, Checkpoint.Restore) between a Commit and the
// next Step. With another Optimizer the copy is made before Commit
// returns.
//
// Restore zeroes each field before decoding it, as BroadcastObject does:
// unexported parts of a field's value do not survive it.
//
// With a DistributedOptimizer that shards its state
// (DistributedOptions.ShardState), Commit gathers the whole optimizer
// state at once (it is then collective, and the commit holds the whole
// state, so that the ranks left after one is lost have its part), Restore
// loads this rank's part of it, and Sync gives every rank rank 0's last
// commit of the optimizer state (not its current one, which a formation
// of another size has just re-sharded without its values; RunElastic
// restores the commit before it syncs, so the two are the same there).
type ElasticState struct {
	opt    Optimizer
	fields []any

	copying chan struct{} // closed when the background copy is done; nil if none
	vals    [][]float64   // per parameter (float64 ones)
	vals32  [][]float32   // per parameter (float32 ones)
	opState OptimizerState
	enc     [][]byte // per field, gob
	commits int64
	reform  <-chan struct{} // closed once a newer generation exists (RunElastic); nil outside it
	mu      sync.Mutex      // guards commits and reform
}

// attach binds the state to the runtime of a new formation of an elastic
// job (nil: none): the optimizer averages over it, and Commit reports
// ErrHostsUpdated once reform is closed.
func (s *ElasticState) attach(rt *Runtime, reform <-chan struct{}) {
	if d, ok := s.opt.(*DistributedOptimizer); ok && rt != nil {
		d.bind(rt)
	}
	s.mu.Lock()
	s.reform = reform
	s.mu.Unlock()
}

// stateCopier is implemented by optimizers whose state can be copied into
// existing buffers, without the allocations of State.
type stateCopier interface {
	// copySlots copies the slots into dst (allocated if nil), reusing its
	// buffers, and returns it.
	copySlots(dst map[string][]float64) map[string][]float64
	// scalars are the step count and the learning rate.
	scalars() (steps int64, lr float64)
	// beforeUpdate has f run before every later change of the values or
	// the slots.
	beforeUpdate(f func())
}

// scalars implements stateCopier.
func (b *base) scalars() (int64, float64) { return b.steps, b.lr }

// copySlots implements stateCopier.
func (b *base) copySlots(dst map[string][]float64) map[string][]float64 {
	if dst == nil {
		dst = make(map[string][]float64, len(b.slots))
	}
	for k, v := range b.slots {
		d := dst[k]
		if len(d) != len(v) {
			d = make([]float64, len(v))
		}
		copy(d, v)
		dst[k] = d
	}
	return dst
}

// NewElasticState returns the elastic state of opt's parameters and
// optimizer state and of fields, committed once.
func NewElasticState(opt Optimizer, fields ...any) (*ElasticState, error) {
	if opt == nil {
		return nil, fmt.Errorf("%w: needs an optimizer, got nil", ErrElasticState)
	}
	for i, f := range fields {
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, fmt.Errorf("%w: field %d must be a non-nil pointer, not %T", ErrElasticState, i, f)
		}
	}
	ps := opt.Params()
	s := &ElasticState{opt: opt, fields: fields, vals: make([][]float64, len(ps)), vals32: make([][]float32, len(ps)), enc: make([][]byte, len(fields))}
	for i, p := range ps {
		if p.Is32() {
			s.vals32[i] = make([]float32, p.Len())
		} else {
			s.vals[i] = make([]float64, p.Len())
		}
	}
	if err := s.Commit(); err != nil {
		return nil, err
	}
	if sc := s.copier(); sc != nil {
		sc.beforeUpdate(s.settle)
	}
	return s, nil
}

// Commit saves the current state in memory, replacing the last commit.
// An error (a field gob cannot encode) leaves the last commit as it was.
// Under RunElastic it returns ErrHostsUpdated, after committing, once the
// launcher has formed a newer generation of the job: return it from the
// training function, and the job re-forms.
func (s *ElasticState) Commit() error {
	s.settle()
	var sharded OptimizerState
	if d := shardedOf(s.opt); d != nil {
		st, err := d.GatherState(context.Background())
		if err != nil {
			return fmt.Errorf("%w: gathering the sharded optimizer state: %w", ErrElasticState, err)
		}
		sharded = st
	}
	enc := make([][]byte, len(s.fields))
	for i, f := range s.fields {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(f); err != nil {
			return fmt.Errorf("%w: committing field %d (%T): %v", ErrElasticState, i, f, err)
		}
		enc[i] = buf.Bytes()
	}
	s.enc = enc
	sc := s.copier()
	switch {
	case shardedOf(s.opt) != nil:
		s.opState = sharded // gathered above, before anything changed
		s.copyState(nil)
	case sc == nil:
		s.opState = s.opt.State() // the optimizer's own deep copy, now
		s.copyState(nil)
	default:
		// The scalars now, the values and slots in the background: the
		// caller may change the learning rate before the next step.
		s.opState.Steps, s.opState.LR = sc.scalars()
		done := make(chan struct{})
		s.copying = done
		go func() {
			defer close(done)
			s.copyState(sc)
		}()
	}
	s.mu.Lock()
	s.commits++
	reform := s.reform
	s.mu.Unlock()
	if reform != nil {
		select {
		case <-reform:
			return ErrHostsUpdated
		default:
		}
	}
	return nil
}

// copyState copies the parameter values, and with sc the optimizer's
// slots, into the commit.
func (s *ElasticState) copyState(sc stateCopier) {
	for i, p := range s.opt.Params() {
		if p.Is32() {
			copy(s.vals32[i], p.Value32)
		} else {
			copy(s.vals[i], p.Value)
		}
	}
	if sc != nil {
		s.opState.Slots = sc.copySlots(s.opState.Slots)
	}
}

// copier is the optimizer (or the one a DistributedOptimizer wraps) when
// it is one of this package's, which copy their state into the commit in
// the background and wait for that copy before they change anything.
func (s *ElasticState) copier() stateCopier {
	opt := s.opt
	if shardedOf(opt) != nil {
		return nil // its state is gathered, at once
	}
	if d, ok := opt.(*DistributedOptimizer); ok {
		opt = d.inner
	}
	sc, _ := opt.(stateCopier)
	return sc
}

// settle waits for the background copy of the last Commit, if any.
func (s *ElasticState) settle() {
	if s.copying != nil {
		<-s.copying
		s.copying = nil
	}
}

// Restore brings back the last commit: the parameter values, the
// optimizer state and the fields.
func (s *ElasticState) Restore() error {
	s.settle()
	if err := s.opt.SetState(s.opState); err != nil {
		return fmt.Errorf("%w: restoring the optimizer: %v", ErrElasticState, err)
	}
	for i, p := range s.opt.Params() {
		if p.Is32() {
			copy(p.Value32, s.vals32[i])
		} else {
			copy(p.Value, s.vals[i])
		}
	}
	for i, f := range s.fields {
		v := reflect.ValueOf(f).Elem()
		v.SetZero()
		if err := gob.NewDecoder(bytes.NewReader(s.enc[i])).Decode(f); err != nil {
			return fmt.Errorf("%w: restoring field %d (%T): %v", ErrElasticState, i, f, err)
		}
	}
	return nil
}

// Sync makes the state of every rank of rt (nil: the default runtime)
// rank 0's (parameters, optimizer state, fields) and commits it: what a
// job formed anew does before it trains on, so that ranks that joined
// start from where the others are. Every rank must call it.
func (s *ElasticState) Sync(ctx context.Context, rt *Runtime) error {
	s.settle()
	if err := BroadcastParameters(ctx, rt, s.opt.Params(), 0); err != nil {
		return err
	}
	if err := s.syncOptimizer(ctx, rt); err != nil {
		return err
	}
	for _, f := range s.fields {
		if err := BroadcastObject(ctx, rt, f, 0); err != nil {
			return err
		}
	}
	return s.Commit()
}

// syncOptimizer makes every rank's optimizer state rank 0's. A sharded
// optimizer (ShardState) may have just been re-sharded for a job of
// another size, which leaves its parts without their state: it takes
// rank 0's last commit, which holds the whole state, instead of gathering
// its parts.
func (s *ElasticState) syncOptimizer(ctx context.Context, rt *Runtime) error {
	if shardedOf(s.opt) == nil {
		return BroadcastOptimizerState(ctx, rt, s.opt, 0)
	}
	st, err := broadcastState(ctx, rt, s.opState, 0)
	if err != nil {
		return err
	}
	return s.opt.SetState(st)
}

// shardedOf is opt if it is a DistributedOptimizer with ShardState.
func shardedOf(opt Optimizer) *DistributedOptimizer {
	if d, ok := opt.(*DistributedOptimizer); ok && d.zero != nil {
		return d
	}
	return nil
}

// Commits is how many times the state was committed (NewElasticState
// commits once).
func (s *ElasticState) Commits() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}
