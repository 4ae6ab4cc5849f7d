package hvd

// base holds what every single-process optimizer has: its parameters, the
// learning rate, the step count and the named state slots.
type base struct {
	params []*Param
	lr     float64
	steps  int64
	slots  slots
	before []func() // run before the values or the slots change (ElasticState)
}

func newBase(params []*Param, lr float64) (base, error) {
	if err := checkParams(params); err != nil {
		return base{}, err
	}
	return base{params: params, lr: lr, slots: slots{}}, nil
}

// addSlots gives every parameter a zero buffer named prefix+name.
func (b *base) addSlots(prefix string) {
	for _, p := range b.params {
		b.slots[prefix+p.Name] = make([]float64, p.Len())
	}
}

// Params are the optimized parameters.
func (b *base) Params() []*Param { return b.params }

// ZeroGrad zeroes every gradient.
func (b *base) ZeroGrad() {
	for _, p := range b.params {
		p.zeroGrad()
	}
}

// LR is the learning rate.
func (b *base) LR() float64 { return b.lr }

// SetLR sets the learning rate.
func (b *base) SetLR(lr float64) { b.lr = lr }

// State returns a deep copy of the optimizer state.
func (b *base) State() OptimizerState {
	return OptimizerState{Steps: b.steps, LR: b.lr, Slots: b.slots.snapshot()}
}

// SetState loads a copy of s.
func (b *base) SetState(s OptimizerState) error {
	b.settle()
	if err := b.slots.load(s.Slots); err != nil {
		return err
	}
	b.steps, b.lr = s.Steps, s.LR
	return nil
}

// beforeUpdate has f run before every later change of the parameters'
// values or the slots (Step, SetState).
func (b *base) beforeUpdate(f func()) { b.before = append(b.before, f) }

// settle runs the beforeUpdate functions.
func (b *base) settle() {
	for _, f := range b.before {
		f()
	}
}
