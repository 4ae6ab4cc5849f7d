package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

// model is a stack of layers with a softmax cross-entropy loss.
type model struct {
	layers []layer
	dlogit mat
}

// newModel builds "mlp" (784-hidden-hidden/2-10) or "cnn" (two 5×5
// convolutions with max-pooling, then a dense layer) from seed.
func newModel(kind string, hidden int, seed uint64) (*model, error) {
	rng := rand.New(rand.NewPCG(seed, 0x1a7e5))
	switch kind {
	case "mlp":
		h2 := max(hidden/2, 1)
		return &model{layers: []layer{
			newDense("fc1", side*side, hidden, true, rng), &relu{},
			newDense("fc2", hidden, h2, false, rng), &relu{},
			newDense("fc3", h2, classes, false, rng),
		}}, nil
	case "cnn":
		return newCNN(rng), nil
	}
	return nil, fmt.Errorf("unknown model %q (want mlp or cnn)", kind)
}

func (m *model) params() []*hvd.Param {
	var ps []*hvd.Param
	for _, l := range m.layers {
		ps = append(ps, l.params()...)
	}
	return ps
}

func (m *model) forward(x *mat) *mat {
	for _, l := range m.layers {
		x = l.forward(x)
	}
	return x
}

// backward runs the layers backwards from the gradient of the logits,
// calling ready with each layer's parameter names as soon as their
// gradients are complete (nil: no one to tell).
func (m *model) backward(dlogits *mat, ready func(names ...string) error) error {
	dy := dlogits
	for i := len(m.layers) - 1; i >= 0; i-- {
		l := m.layers[i]
		dy = l.backward(dy)
		if ps := l.params(); ready != nil && len(ps) > 0 {
			names := make([]string, len(ps))
			for j, p := range ps {
				names[j] = p.Name
			}
			if err := ready(names...); err != nil {
				return err
			}
		}
	}
	return nil
}

// loss returns the mean cross-entropy of the logits against the labels,
// the number of correct predictions, and the loss's gradient with respect
// to the logits: (softmax − one-hot) / batch.
func (m *model) loss(logits *mat, labels []uint8) (float64, int, *mat) {
	d := m.dlogit.reshape(logits.r, logits.c)
	total, correct := 0.0, 0
	for i := range logits.r {
		row, g := logits.d[i*logits.c:(i+1)*logits.c], d.d[i*logits.c:(i+1)*logits.c]
		best, top := 0, row[0]
		for j, v := range row {
			if v > top {
				best, top = j, v
			}
		}
		if best == int(labels[i]) {
			correct++
		}
		sum := 0.0
		for j, v := range row {
			g[j] = math.Exp(v - top)
			sum += g[j]
		}
		total += math.Log(sum) - (row[labels[i]] - top)
		for j := range g {
			g[j] /= sum * float64(logits.r)
		}
		g[labels[i]] -= 1 / float64(logits.r)
	}
	return total / float64(logits.r), correct, d
}
