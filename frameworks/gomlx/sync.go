package hvdgomlx

import (
	stdctx "context"
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/metrics"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/kernels"
)

// syncName prefixes the names of the broadcasts of variables.
const syncName = "hvdgomlx.var:"

// gradName prefixes the names of the fused gradient all-reduces.
const gradName = "hvdgomlx.grads:"

// sync initializes the context's variables that have no value yet and
// broadcasts from rank 0 every variable not broadcast before, in the order
// of their scope and name; it leaves out the gradients, the context's
// random-number state and the train metrics (whose names are unique to
// each Trainer).
func (o *Optimizer) sync() error {
	if err := o.ctx.InitializeVariables(o.backend, nil); err != nil {
		return fmt.Errorf("hvdgomlx: initializing the variables: %w", err)
	}
	var todo []*context.Variable
	for v := range o.ctx.IterVariables() {
		key := v.ScopeAndName()
		if o.synced[key] || v.Name() == context.RNGStateVariableName ||
			inScope(v, GradientsScope) || inScope(v, metricsScope) {
			continue
		}
		todo = append(todo, v)
	}
	slices.SortFunc(todo, func(a, b *context.Variable) int {
		return strings.Compare(a.ScopeAndName(), b.ScopeAndName())
	})
	return o.broadcast(todo)
}

// metricsScope is where GoMLX's metrics keep their variables.
const metricsScope = context.ScopeSeparator + metrics.Scope

// inScope tells whether v is in the absolute scope or below it.
func inScope(v *context.Variable, scope string) bool {
	return v.Scope() == scope || strings.HasPrefix(v.Scope(), scope+context.ScopeSeparator)
}

// broadcast sets vars to rank 0's values: each variable's bytes travel as
// one uint8 broadcast named after it (a rank with other variables fails
// the broadcast instead of mixing them up).
func (o *Optimizer) broadcast(vars []*context.Variable) error {
	if len(vars) == 0 {
		return nil
	}
	bufs := make([][]byte, len(vars))
	hs := make([]*hvd.Handle, len(vars))
	for i, v := range vars {
		t, err := v.Value()
		if err != nil {
			return fmt.Errorf("hvdgomlx: variable %s: %w", v.ScopeAndName(), err)
		}
		if err := t.ConstBytes(func(b []byte) { bufs[i] = slices.Clone(b) }); err != nil {
			return fmt.Errorf("hvdgomlx: variable %s: %w", v.ScopeAndName(), err)
		}
		hs[i] = o.rt.BroadcastAsync(hvd.NewTensor(syncName+v.ScopeAndName(), bufs[i]), 0)
	}
	for i, h := range hs {
		if err := h.Wait(stdctx.Background()); err != nil {
			return fmt.Errorf("hvdgomlx: broadcast of variable %s: %w", vars[i].ScopeAndName(), err)
		}
	}
	for i, v := range vars {
		t, err := v.Value()
		if err != nil {
			return err
		}
		if err := t.MutableBytes(func(b []byte) { copy(b, bufs[i]) }); err != nil {
			return fmt.Errorf("hvdgomlx: variable %s: %w", v.ScopeAndName(), err)
		}
		o.synced[v.ScopeAndName()] = true
	}
	return nil
}

// average replaces every gradient variable's value by its average across
// the ranks: the gradients of each dtype are copied into one buffer, which
// one all-reduce averages, and copied back.
func (o *Optimizer) average(ctx stdctx.Context) error {
	type span struct {
		i          int
		start, end int
	}
	spans := map[dtypes.DType][]span{}
	var order []dtypes.DType
	for i, gv := range o.grads {
		dt := gv.DType()
		if _, err := hvdDType(dt); err != nil {
			return fmt.Errorf("hvdgomlx: gradient of %s: %w", o.vars[i].ScopeAndName(), err)
		}
		n := gv.Shape().Memory()
		prev := spans[dt]
		start := 0
		if len(prev) > 0 {
			start = prev[len(prev)-1].end
		}
		if len(prev) == 0 {
			order = append(order, dt)
		}
		spans[dt] = append(prev, span{i, start, start + int(n)})
	}
	hs := make([]*hvd.Handle, 0, len(order))
	for _, dt := range order {
		ss := spans[dt]
		size := ss[len(ss)-1].end
		buf := o.fused[dt]
		if len(buf) != size {
			buf = make([]byte, size)
			o.fused[dt] = buf
		}
		for _, s := range ss {
			t, err := o.grads[s.i].Value()
			if err != nil {
				return fmt.Errorf("hvdgomlx: gradient of %s: %w", o.vars[s.i].ScopeAndName(), err)
			}
			if err := t.ConstBytes(func(b []byte) { copy(buf[s.start:s.end], b) }); err != nil {
				return fmt.Errorf("hvdgomlx: gradient of %s: %w", o.vars[s.i].ScopeAndName(), err)
			}
		}
		kdt, _ := hvdDType(dt)
		t := &hvd.Tensor{Name: gradName + dt.String(), DType: kdt, Data: buf}
		hs = append(hs, o.rt.AllreduceAsync(t, kernels.Average, hvd.ReduceOptions{}))
	}
	for i, h := range hs {
		if err := h.Wait(ctx); err != nil {
			return fmt.Errorf("hvdgomlx: all-reduce of the %s gradients: %w", order[i], err)
		}
	}
	for _, dt := range order {
		buf := o.fused[dt]
		for _, s := range spans[dt] {
			t, err := o.grads[s.i].Value()
			if err != nil {
				return err
			}
			if err := t.MutableBytes(func(b []byte) { copy(b, buf[s.start:s.end]) }); err != nil {
				return fmt.Errorf("hvdgomlx: gradient of %s: %w", o.vars[s.i].ScopeAndName(), err)
			}
		}
	}
	return nil
}

// hvdDType is the gorovod dtype of a GoMLX floating-point dtype.
func hvdDType(dt dtypes.DType) (kernels.DType, error) {
	switch dt {
	case dtypes.Float32:
		return kernels.F32, nil
	case dtypes.Float64:
		return kernels.F64, nil
	}
	return 0, fmt.Errorf("dtype %s is not averaged (float32 and float64 are)", dt)
}
