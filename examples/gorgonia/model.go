package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// arch sizes the CNN:
//
//	x (B,1,28,28) → conv 3×3 (F1) → ReLU → max-pool 2×2 → (B,F1,14,14)
//	              → conv 3×3 (F2) → ReLU → max-pool 2×2 → (B,F2,7,7)
//	              → dense (F2·49 → H) + bias → ReLU → dense (H → 10) + bias
//	              → log-softmax → cross-entropy with the one-hot labels
type arch struct {
	F1, F2, Hidden int
}

// shapes are the learnables' shapes, in the order of the weights' nodes.
func (a arch) shapes() []tensor.Shape {
	return []tensor.Shape{
		{a.F1, 1, 3, 3},
		{a.F2, a.F1, 3, 3},
		{a.F2 * 7 * 7, a.Hidden},
		{1, a.Hidden},
		{a.Hidden, classes},
		{1, classes},
	}
}

var weightNames = []string{"conv1", "conv2", "dense1", "bias1", "dense2", "bias2"}

// newWeights makes the learnables in g, He-initialised from rng (the
// biases zero).
func newWeights(g *G.ExprGraph, a arch, rng *rand.Rand) G.Nodes {
	var ws G.Nodes
	for i, s := range a.shapes() {
		d := make([]float32, s.TotalSize())
		if weightNames[i][:4] != "bias" {
			fanIn := s.TotalSize() / s[0]
			if len(s) == 2 {
				fanIn = s[0]
			}
			std := math.Sqrt(2 / float64(fanIn))
			for j := range d {
				d[j] = float32(rng.NormFloat64() * std)
			}
		}
		v := tensor.New(tensor.WithShape(s...), tensor.WithBacking(d))
		ws = append(ws, G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(weightNames[i]), G.WithValue(v)))
	}
	return ws
}

// inputsOf makes nodes of the learnables' shapes to evaluate with: an
// evaluation graph binds them to the training graph's values (G.Let).
func inputsOf(g *G.ExprGraph, a arch) G.Nodes {
	var ws G.Nodes
	for i, s := range a.shapes() {
		ws = append(ws, G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(weightNames[i])))
	}
	return ws
}

// net is the CNN on a batch of a fixed size.
type net struct {
	g       *G.ExprGraph
	x, y    *G.Node // images (B,1,28,28), one-hot labels (B,10)
	weights G.Nodes
	logits  *G.Node
	loss    *G.Node // mean cross-entropy over the batch
	batch   int
}

// graphMu serialises graph construction: Gorgonia's Conv2d and MaxPool2D
// number their groups with an unguarded package-level counter
// (internal/encoding.NewGroup), and the tests run several ranks as
// goroutines of one process (the race detector caught it).
var graphMu sync.Mutex

// build makes the forward pass (and the loss) over weights in g.
func build(g *G.ExprGraph, weights G.Nodes, batch int) (*net, error) {
	graphMu.Lock()
	defer graphMu.Unlock()
	n := &net{g: g, weights: weights, batch: batch}
	n.x = G.NewTensor(g, tensor.Float32, 4, G.WithShape(batch, 1, side, side), G.WithName("x"))
	n.y = G.NewMatrix(g, tensor.Float32, G.WithShape(batch, classes), G.WithName("y"))
	var err error
	must := func(v *G.Node, e error) *G.Node {
		if err == nil && e != nil {
			err = e
		}
		return v
	}
	conv := func(in, filter *G.Node) *G.Node {
		c := must(G.Conv2d(in, filter, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
		if err != nil {
			return nil
		}
		r := must(G.Rectify(c))
		if err != nil {
			return nil
		}
		return must(G.MaxPool2D(r, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	}
	dense := func(in, w, b *G.Node) *G.Node {
		m := must(G.Mul(in, w))
		if err != nil {
			return nil
		}
		return must(G.BroadcastAdd(m, b, nil, []byte{0}))
	}
	h := conv(n.x, weights[0])
	h = conv(h, weights[1])
	if err != nil {
		return nil, err
	}
	s := h.Shape()
	h = must(G.Reshape(h, tensor.Shape{batch, s[1] * s[2] * s[3]}))
	h = dense(h, weights[2], weights[3])
	if err != nil {
		return nil, err
	}
	h = must(G.Rectify(h))
	if err != nil {
		return nil, err
	}
	n.logits = dense(h, weights[4], weights[5])
	if err != nil {
		return nil, err
	}
	logp := must(G.LogSoftMax(n.logits))
	if err != nil {
		return nil, err
	}
	sum := must(G.Sum(must(G.HadamardProd(logp, n.y))))
	if err != nil {
		return nil, err
	}
	n.loss = must(G.Div(must(G.Neg(sum)), G.NewConstant(float32(batch))))
	if err != nil {
		return nil, fmt.Errorf("building the CNN: %w", err)
	}
	return n, nil
}

// fill loads the images and one-hot labels of idx into the batch tensors
// x and y; rows past len(idx) are zero.
func fill(d *dataset, idx []int, x, y *tensor.Dense) {
	xs, ys := x.Data().([]float32), y.Data().([]float32)
	clear(xs)
	clear(ys)
	for i, j := range idx {
		copy(xs[i*pixels:(i+1)*pixels], d.X[j*pixels:(j+1)*pixels])
		ys[i*classes+int(d.Labels[j])] = 1
	}
}

// correct counts the images of idx whose row of logits (row i for idx[i])
// is largest at their label.
func correct(d *dataset, idx []int, logits []float32) int {
	n := 0
	for i, j := range idx {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for c, v := range row {
			if v > row[best] {
				best = c
			}
		}
		if best == int(d.Labels[j]) {
			n++
		}
	}
	return n
}
