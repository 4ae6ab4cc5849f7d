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
	c := o.cfg
	t := float64(o.steps + 1)
	c1 := 1 - math.Pow(c.Beta1, t)
	c2 := 1 - math.Pow(c.Beta2, t)
	for _, p := range o.params {
		m, v := o.slots["adam.m/"+p.Name], o.slots["adam.v/"+p.Name]
		for i, g := range p.Grad {
			w := p.Value[i]
			if c.Decoupled {
				w -= o.lr * c.WeightDecay * w
			} else {
				g += c.WeightDecay * w
			}
			m[i] = c.Beta1*m[i] + (1-c.Beta1)*g
			v[i] = c.Beta2*v[i] + (1-c.Beta2)*g*g
			p.Value[i] = w - o.lr*(m[i]/c1)/(math.Sqrt(v[i]/c2)+c.Epsilon)
		}
	}
	o.steps++
	return nil
}
