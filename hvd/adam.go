package hvd

import (
	"context"
	"math"
)

// AdamConfig configures Adam. Zero Beta1, Beta2 and Epsilon take the usual
// defaults 0.9, 0.999 and 1e-8.
type AdamConfig struct {
	LR           float64
	Beta1, Beta2 float64
	Epsilon      float64
	WeightDecay  float64
	// Decoupled applies WeightDecay directly to the weights (AdamW)
	// instead of adding it to the gradient.
	Decoupled bool
}

// Adam is the Adam optimizer (Kingma and Ba), with bias-corrected moment
// estimates kept in the slots "adam.m/<name>" and "adam.v/<name>".
type Adam struct {
	base
	cfg AdamConfig
}

// NewAdam returns an Adam optimizer over params.
func NewAdam(params []*Param, cfg AdamConfig) (*Adam, error) {
	b, err := newBase(params, cfg.LR)
	if err != nil {
		return nil, err
	}
	if cfg.Beta1 == 0 {
		cfg.Beta1 = 0.9
	}
	if cfg.Beta2 == 0 {
		cfg.Beta2 = 0.999
	}
	if cfg.Epsilon == 0 {
		cfg.Epsilon = 1e-8
	}
	b.addSlots("adam.m/")
	b.addSlots("adam.v/")
	return &Adam{base: b, cfg: cfg}, nil
}

// Step applies one Adam update to every parameter.
func (o *Adam) Step(context.Context) error {
	o.settle()
	t := float64(o.steps + 1)
	u := adamStep{cfg: &o.cfg, lr: o.lr, c1: 1 - math.Pow(o.cfg.Beta1, t), c2: 1 - math.Pow(o.cfg.Beta2, t)}
	for _, p := range o.params {
		m, v := o.slots["adam.m/"+p.Name], o.slots["adam.v/"+p.Name]
		if p.Is32() {
			adamUpdate(u, p.Value32, p.Grad32, m, v)
		} else {
			adamUpdate(u, p.Value, p.Grad, m, v)
		}
	}
	o.steps++
	return nil
}

// adamStep is what one Adam step applies to every parameter: the
// configuration, learning rate and the two bias corrections.
type adamStep struct {
	cfg        *AdamConfig
	lr, c1, c2 float64
}

// adamUpdate applies one update to the values w from their gradient grad
// and moments m and v, computing in float64.
func adamUpdate[T float32 | float64](u adamStep, w, grad []T, m, v []float64) {
	c := u.cfg
	for i, gt := range grad {
		g, x := float64(gt), float64(w[i])
		if c.Decoupled {
			x -= u.lr * c.WeightDecay * x
		} else {
			g += c.WeightDecay * x
		}
		m[i] = c.Beta1*m[i] + (1-c.Beta1)*g
		v[i] = c.Beta2*v[i] + (1-c.Beta2)*g*g
		w[i] = T(x - u.lr*(m[i]/u.c1)/(math.Sqrt(v[i]/u.c2)+c.Epsilon))
	}
}
