package hvdgorgonia_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	hvdgorgonia "github.com/gorovod/gorovod/frameworks/gorgonia"
	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The test model: pred = tanh(x·W1)·W2, loss = mean((pred-y)²), with x of
// shape batch×in, W1 in×hid, W2 hid×out. Its loss is a mean over the batch,
// so the average of the ranks' gradients over equal shards is the gradient
// over their concatenation.
const (
	nIn, nHid, nOut = 5, 7, 3
	steps           = 4
	perRank         = 6 // rows of a rank's batch
)

type model struct {
	g          *G.ExprGraph
	x, y       *G.Node
	learnables G.Nodes
	vm         G.VM
	dt         tensor.Dtype
}

// newModel builds the model for batches of rows rows, its weights drawn
// from seed.
func newModel(t testing.TB, dt tensor.Dtype, rows int, seed uint64) *model {
	t.Helper()
	m := &model{g: G.NewGraph(), dt: dt}
	rng := rand.New(rand.NewPCG(seed, 7))
	w := func(r, c int, name string) *G.Node {
		return G.NewMatrix(m.g, dt, G.WithShape(r, c), G.WithName(name), G.WithValue(randDense(dt, rng, r, c)))
	}
	w1, w2 := w(nIn, nHid, "w1"), w(nHid, nOut, "w2")
	m.x = G.NewMatrix(m.g, dt, G.WithShape(rows, nIn), G.WithName("x"))
	m.y = G.NewMatrix(m.g, dt, G.WithShape(rows, nOut), G.WithName("y"))
	h := G.Must(G.Tanh(G.Must(G.Mul(m.x, w1))))
	pred := G.Must(G.Mul(h, w2))
	loss := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(pred, m.y))))))
	m.learnables = G.Nodes{w1, w2}
	if _, err := G.Grad(loss, m.learnables...); err != nil {
		t.Fatal(err)
	}
	m.vm = G.NewTapeMachine(m.g, G.BindDualValues(m.learnables...))
	t.Cleanup(func() { m.vm.Close() })
	return m
}

func randDense(dt tensor.Dtype, rng *rand.Rand, r, c int) *tensor.Dense {
	if dt == tensor.Float32 {
		d := make([]float32, r*c)
		for i := range d {
			d[i] = float32(rng.NormFloat64() * 0.5)
		}
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
	}
	d := make([]float64, r*c)
	for i := range d {
		d[i] = rng.NormFloat64() * 0.5
	}
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(d))
}

// batch returns rows [lo, hi) of step's global batch: the same data
// whatever the number of ranks.
func batch(dt tensor.Dtype, step, lo, hi int) (x, y *tensor.Dense) {
	rng := rand.New(rand.NewPCG(uint64(step), 11))
	all := 64
	xs := make([]float64, all*nIn)
	ys := make([]float64, all*nOut)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	for i := range ys {
		ys[i] = rng.NormFloat64()
	}
	xs, ys = xs[lo*nIn:hi*nIn], ys[lo*nOut:hi*nOut]
	if dt == tensor.Float32 {
		return tensor.New(tensor.WithShape(hi-lo, nIn), tensor.WithBacking(to32(xs))),
			tensor.New(tensor.WithShape(hi-lo, nOut), tensor.WithBacking(to32(ys)))
	}
	return tensor.New(tensor.WithShape(hi-lo, nIn), tensor.WithBacking(xs)),
		tensor.New(tensor.WithShape(hi-lo, nOut), tensor.WithBacking(ys))
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// train runs steps steps of s on rows [lo, hi) of each step's batch.
func (m *model) train(t testing.TB, s G.Solver, lo, hi int) error {
	for step := range steps {
		x, y := batch(m.dt, step, lo, hi)
		if err := G.Let(m.x, x); err != nil {
			return err
		}
		if err := G.Let(m.y, y); err != nil {
			return err
		}
		if err := m.vm.RunAll(); err != nil {
			return err
		}
		if err := s.Step(G.NodesToValueGrads(m.learnables)); err != nil {
			return err
		}
		m.vm.Reset()
	}
	return nil
}

// weights returns the learnables' values as float64.
func (m *model) weights() []float64 {
	var out []float64
	for _, n := range m.learnables {
		switch d := n.Value().Data().(type) {
		case []float32:
			for _, v := range d {
				out = append(out, float64(v))
			}
		case []float64:
			out = append(out, d...)
		}
	}
	return out
}

var solvers = []struct {
	name string
	new  func() G.Solver
}{
	{"Vanilla", func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.1)) }},
	{"Momentum", func() G.Solver { return G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.9)) }},
	{"Adam", func() G.Solver { return G.NewAdamSolver(G.WithLearnRate(0.01)) }},
	{"RMSProp", func() G.Solver { return G.NewRMSPropSolver(G.WithLearnRate(0.01)) }},
	{"AdaGrad", func() G.Solver { return G.NewAdaGradSolver(G.WithLearnRate(0.05)) }},
}

// runRanks trains the model on n in-process ranks, each rank starting from
// its own random weights that BroadcastLearnables replaces with rank 0's,
// and returns every rank's final weights.
func runRanks(t *testing.T, n int, dt tensor.Dtype, newSolver func() G.Solver) [][]float64 {
	t.Helper()
	rts := hvdtest.Start(t, n)
	out := make([][]float64, n)
	hvdtest.Each(t, rts, func(rt *hvd.Runtime) error {
		r := rt.Rank()
		m := newModel(t, dt, perRank, uint64(100+r))
		if err := hvdgorgonia.BroadcastLearnables(context.Background(), rt, m.learnables, 0); err != nil {
			return err
		}
		s, err := hvdgorgonia.NewDistributedSolver(newSolver(), rt, hvdgorgonia.Options{})
		if err != nil {
			return err
		}
		if err := m.train(t, s, r*perRank, (r+1)*perRank); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		out[r] = m.weights()
		return nil
	})
	return out
}

// reference trains the model on one process without the adapter over the
// concatenation of n ranks' batches, from rank 0's initial weights.
func reference(t *testing.T, n int, dt tensor.Dtype, s G.Solver) []float64 {
	t.Helper()
	m := newModel(t, dt, n*perRank, 100)
	if err := m.train(t, s, 0, n*perRank); err != nil {
		t.Fatal(err)
	}
	return m.weights()
}

// maxRelDiff is max|a-b| / max|b|.
func maxRelDiff(a, b []float64) float64 {
	var d, s float64
	for i := range b {
		d = math.Max(d, math.Abs(a[i]-b[i]))
		s = math.Max(s, math.Abs(b[i]))
	}
	return d / s
}

// Every solver leaves the same weights, bit for bit, on every rank at np 1
// to 4, and they moved from where they started.
func TestWeightsIdenticalOnAllRanks(t *testing.T) {
	for _, sv := range solvers {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for n := 1; n <= 4; n++ {
				t.Run(fmt.Sprintf("%s/%v/np%d", sv.name, dt, n), func(t *testing.T) {
					w := runRanks(t, n, dt, sv.new)
					start := newModel(t, dt, perRank, 100).weights()
					if maxRelDiff(w[0], start) < 1e-3 {
						t.Fatalf("rank 0's weights barely moved from the start (relative change %g)", maxRelDiff(w[0], start))
					}
					for r := 1; r < n; r++ {
						for i := range w[0] {
							if w[r][i] != w[0][i] {
								t.Fatalf("rank %d weight %d = %v, rank 0's = %v", r, i, w[r][i], w[0][i])
							}
						}
					}
				})
			}
		}
	}
}

// Plain SGD on n ranks equals SGD on one process over the concatenated
// batch: max|Δ|/max|w| at most 1e-6 in float32 and 1e-12 in float64. The
// same holds with a solver that never zeros its gradients, since the
// adapter does (the gradient-clearing trap).
func TestSGDMatchesOneRankOverConcatenatedBatch(t *testing.T) {
	tol := map[tensor.Dtype]float64{tensor.Float32: 1e-6, tensor.Float64: 1e-12}
	for _, inner := range []struct {
		name string
		new  func() G.Solver
	}{
		{"Vanilla", func() G.Solver { return G.NewVanillaSolver(G.WithLearnRate(0.1)) }},
		{"NonZeroing", func() G.Solver { return &nonZeroingSGD{eta: 0.1} }},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for n := 1; n <= 4; n++ {
				t.Run(fmt.Sprintf("%s/%v/np%d", inner.name, dt, n), func(t *testing.T) {
					want := reference(t, n, dt, G.NewVanillaSolver(G.WithLearnRate(0.1)))
					got := runRanks(t, n, dt, inner.new)
					for r := range got {
						d := maxRelDiff(got[r], want)
						t.Logf("rank %d: max|Δ|/max|w| = %.3g", r, d)
						if d > tol[dt] {
							t.Fatalf("rank %d: weights differ from the one-rank run by %g relative (tolerance %g)", r, d, tol[dt])
						}
					}
				})
			}
		}
	}
}

// nonZeroingSGD is plain SGD that leaves the gradients as it found them,
// as a solver of one's own may: w -= eta·g.
type nonZeroingSGD struct{ eta float64 }

func (s *nonZeroingSGD) Step(model []G.ValueGrad) error {
	for _, vg := range model {
		g, err := vg.Grad()
		if err != nil {
			return err
		}
		switch w := vg.Value().Data().(type) {
		case []float32:
			for i, gi := range g.Data().([]float32) {
				w[i] -= float32(s.eta) * gi
			}
		case []float64:
			for i, gi := range g.Data().([]float64) {
				w[i] -= s.eta * gi
			}
		}
	}
	return nil
}

// The trap itself: Gorgonia's tape machine adds each run's gradient to the
// learnable's gradient, so a solver that does not zero them steps on the
// sum of every pass so far; after the adapter's Step every gradient is
// zero.
func TestGradientsZeroAfterStep(t *testing.T) {
	m := newModel(t, tensor.Float64, perRank, 1)
	x, y := batch(tensor.Float64, 0, 0, perRank)
	run := func() []float64 {
		G.Let(m.x, x)
		G.Let(m.y, y)
		if err := m.vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		m.vm.Reset()
		g, _ := m.learnables[0].Grad()
		return append([]float64(nil), g.Data().([]float64)...)
	}
	g1, g2 := run(), run()
	if g1[0] == 0 || math.Abs(g2[0]-2*g1[0]) > 1e-12*math.Abs(g1[0]) {
		t.Fatalf("second pass's gradient %v, want twice the first's %v: Gorgonia no longer accumulates", g2[0], g1[0])
	}
	err := hvdtest.Run(1, func(rt *hvd.Runtime) error {
		s, err := hvdgorgonia.NewDistributedSolver(&nonZeroingSGD{eta: 0}, rt, hvdgorgonia.Options{})
		if err != nil {
			return err
		}
		return s.Step(G.NodesToValueGrads(m.learnables))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.learnables {
		g, _ := n.Grad()
		for i, v := range g.Data().([]float64) {
			if v != 0 {
				t.Fatalf("%s: gradient %d = %v after Step, want 0", n.Name(), i, v)
			}
		}
	}
	if g3 := run(); g3[0] != g1[0] {
		t.Fatalf("pass after Step: gradient %v, want the first pass's %v", g3[0], g1[0])
	}
}
