package hvd

import "context"

// SGDConfig configures stochastic gradient descent.
type SGDConfig struct {
	// LR is the learning rate.
	LR float64
	// Momentum is the momentum factor; 0 turns momentum off.
	Momentum float64
	// Nesterov uses Nesterov momentum (needs Momentum > 0).
	Nesterov bool
	// WeightDecay adds WeightDecay·value to every gradient (L2 penalty).
	WeightDecay float64
}

// SGD is stochastic gradient descent with optional momentum, Nesterov
// momentum and weight decay, with PyTorch's update rule:
//
//	g = grad + wd·w;  buf = μ·buf + g;  g = g + μ·buf (Nesterov) or buf;  w -= lr·g
type SGD struct {
	base
	cfg SGDConfig
}

// NewSGD returns an SGD optimizer over params. With momentum it keeps one
// slot "momentum/<name>" per parameter.
func NewSGD(params []*Param, cfg SGDConfig) (*SGD, error) {
	b, err := newBase(params, cfg.LR)
	if err != nil {
		return nil, err
	}
	if cfg.Momentum != 0 {
		b.addSlots("momentum/")
	}
	return &SGD{base: b, cfg: cfg}, nil
}

// Step applies one SGD update to every parameter.
func (o *SGD) Step(context.Context) error {
	o.settle()
	for _, p := range o.params {
		buf := o.slots["momentum/"+p.Name]
		if p.Is32() {
			sgdUpdate(&o.cfg, o.lr, p.Value32, p.Grad32, buf)
		} else {
			sgdUpdate(&o.cfg, o.lr, p.Value, p.Grad, buf)
		}
	}
	o.steps++
	return nil
}

// sgdUpdate applies one update to the values w from their gradient grad
// and momentum buffer buf (nil without momentum), computing in float64.
// Each case is its own loop, with the bounds checks hoisted, since the
// update runs over every parameter of the model every step.
func sgdUpdate[T float32 | float64](cfg *SGDConfig, lr float64, w, grad []T, buf []float64) {
	mu, wd := cfg.Momentum, cfg.WeightDecay
	w = w[:len(grad)]
	switch {
	case buf == nil:
		for i, gt := range grad {
			wi := float64(w[i])
			w[i] = T(wi - lr*(float64(gt)+wd*wi))
		}
	case cfg.Nesterov:
		buf = buf[:len(grad)]
		for i, gt := range grad {
			wi := float64(w[i])
			g := float64(gt) + wd*wi
			b := mu*buf[i] + g
			buf[i] = b
			w[i] = T(wi - lr*(g+mu*b))
		}
	default:
		buf = buf[:len(grad)]
		for i, gt := range grad {
			wi := float64(w[i])
			b := mu*buf[i] + (float64(gt) + wd*wi)
			buf[i] = b
			w[i] = T(wi - lr*b)
		}
	}
}
