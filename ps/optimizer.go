package ps

import (
	"fmt"
	"math"
	"sync"
)

// Optimizer kinds.
const (
	OptimizerSGD  = "sgd"
	OptimizerAdam = "adam"
)

// Optimizer is the update rule the servers apply to each pushed gradient
// g, element by element, for a value w:
//
//   - "sgd" with Momentum m: v = m*v + g; w -= LR*v (v starts at zero).
//     Momentum 0 is plain SGD: w -= LR*g.
//   - "adam": t++; m = β1*m + (1-β1)*g; v = β2*v + (1-β2)*g*g;
//     w -= LR * (m/(1-β1^t)) / (sqrt(v/(1-β2^t)) + ε), with m, v starting
//     at zero and t counted per shard (each push counts once).
//
// Each product is rounded to float64 before it is added (no fused
// multiply-add), so an update gives the same bits on every architecture.
type Optimizer struct {
	Kind                  string  // "sgd" (with Momentum ≥ 0) or "adam"
	LR                    float64 // learning rate, > 0
	Momentum              float64 // sgd: ≥ 0
	Beta1, Beta2, Epsilon float64 // adam; zero means 0.9, 0.999, 1e-8
}

// withDefaults fills Adam's zero fields.
func (o Optimizer) withDefaults() Optimizer {
	if o.Kind == OptimizerAdam {
		if o.Beta1 == 0 {
			o.Beta1 = 0.9
		}
		if o.Beta2 == 0 {
			o.Beta2 = 0.999
		}
		if o.Epsilon == 0 {
			o.Epsilon = 1e-8
		}
	}
	return o
}

// validate checks an optimizer after withDefaults.
func (o Optimizer) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !finite(o.LR) || o.LR <= 0 {
		return fmt.Errorf("optimizer: learning rate %v, want a positive finite number", o.LR)
	}
	switch o.Kind {
	case OptimizerSGD:
		if !finite(o.Momentum) || o.Momentum < 0 {
			return fmt.Errorf("optimizer: sgd momentum %v, want a finite number >= 0", o.Momentum)
		}
		if o.Beta1 != 0 || o.Beta2 != 0 || o.Epsilon != 0 {
			return fmt.Errorf("optimizer: sgd takes no Beta1, Beta2 or Epsilon")
		}
	case OptimizerAdam:
		if o.Momentum != 0 {
			return fmt.Errorf("optimizer: adam takes no Momentum")
		}
		if !finite(o.Beta1) || o.Beta1 < 0 || o.Beta1 >= 1 || !finite(o.Beta2) || o.Beta2 < 0 || o.Beta2 >= 1 {
			return fmt.Errorf("optimizer: adam betas %v, %v, want each in [0, 1)", o.Beta1, o.Beta2)
		}
		if !finite(o.Epsilon) || o.Epsilon <= 0 {
			return fmt.Errorf("optimizer: adam epsilon %v, want a positive finite number", o.Epsilon)
		}
	default:
		return fmt.Errorf("optimizer: unknown kind %q (want %q or %q)", o.Kind, OptimizerSGD, OptimizerAdam)
	}
	return nil
}

// slots is how many per-element slot buffers the optimizer keeps.
func (o Optimizer) slots() int {
	switch {
	case o.Kind == OptimizerAdam:
		return 2
	case o.Momentum != 0:
		return 1
	}
	return 0
}

// shardState is what a server keeps of one shard: its values, the
// optimizer's slots and Adam's step count, under one mutex.
type shardState struct {
	mu   sync.Mutex
	w    []float64
	m, v []float64 // momentum buffer (sgd); first and second moments (adam)
	t    int64     // adam: updates applied to this shard
}

func newShardState(n int, o Optimizer) *shardState {
	s := &shardState{w: make([]float64, n)}
	if o.slots() >= 1 {
		s.m = make([]float64, n)
	}
	if o.slots() >= 2 {
		s.v = make([]float64, n)
	}
	return s
}

// apply applies one gradient (len(s.w) values) with o. The caller holds
// s.mu.
func (s *shardState) apply(o Optimizer, grad []float64) {
	g := func(i int) float64 { return grad[i] }
	switch {
	case o.Kind == OptimizerAdam:
		s.t++
		c1 := 1 - math.Pow(o.Beta1, float64(s.t))
		c2 := 1 - math.Pow(o.Beta2, float64(s.t))
		for i := range s.w {
			gi := g(i)
			s.m[i] = float64(o.Beta1*s.m[i]) + float64((1-o.Beta1)*gi)
			s.v[i] = float64(o.Beta2*s.v[i]) + float64(float64((1-o.Beta2)*gi)*gi)
			mhat := s.m[i] / c1
			vhat := s.v[i] / c2
			s.w[i] -= float64(o.LR*mhat) / (math.Sqrt(vhat) + o.Epsilon)
		}
	case o.Momentum != 0:
		for i := range s.w {
			s.m[i] = float64(o.Momentum*s.m[i]) + g(i)
			s.w[i] -= float64(o.LR * s.m[i])
		}
	default:
		for i := range s.w {
			s.w[i] -= float64(o.LR * g(i))
		}
	}
}

// reset zeroes the optimizer's slots and step (Load).
func (s *shardState) reset() {
	clear(s.m)
	clear(s.v)
	s.t = 0
}
