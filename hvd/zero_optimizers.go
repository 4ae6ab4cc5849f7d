package hvd

// What makes SGD and Adam shardable (see zero.go), and StateBytes.

// StateBytes is the memory the optimizer's state takes: 8 bytes per value
// of its slots.
func (b *base) StateBytes() int64 {
	var n int64
	for _, v := range b.slots {
		n += int64(len(v)) * 8
	}
	return n
}

func (b *base) releaseSlots() { b.slots = slots{} }

func (b *base) setScalars(steps int64, lr float64) { b.steps, b.lr = steps, lr }

func (o *SGD) over(params []*Param) (Optimizer, error) {
	s, err := NewSGD(params, o.cfg)
	if err != nil {
		return nil, err
	}
	s.setScalars(o.steps, o.lr)
	return s, nil
}

func (o *SGD) slotPrefixes() []string {
	if o.cfg.Momentum == 0 {
		return nil
	}
	return []string{"momentum/"}
}

func (o *Adam) over(params []*Param) (Optimizer, error) {
	a, err := NewAdam(params, o.cfg)
	if err != nil {
		return nil, err
	}
	a.setScalars(o.steps, o.lr)
	return a, nil
}

func (o *Adam) slotPrefixes() []string { return []string{"adam.m/", "adam.v/"} }
