package compress

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gorovod/gorovod/hvd"
)

// PowerSGD compresses each gradient of two or more dimensions to a rank-r
// approximation P·Qᵀ with one step of power iteration a step, warm-started
// from the last step's Q, and error feedback (Vogels, Karimireddy and
// Jaggi, "PowerSGD: practical low-rank gradient compression for
// distributed optimization", NeurIPS 2019). The gradient is viewed as a
// matrix of Shape[0] rows (hvd.Param.Shape); let a×b be that matrix or its
// transpose, whichever has a ≤ b. Each rank adds its residual to its
// gradient (M), computes P = M·Q (a×r) and the ranks sum P (the first
// all-reduce, "grad/<name>/p"); every rank orthonormalizes the sum's
// columns, computes Q = Mᵀ·P (b×r), keeps M − P·Qᵀ as its next residual,
// and the ranks sum Q (the second, "grad/<name>/q"); the result is P·Qᵀ,
// and Q is the next step's start. The two all-reduces carry (a+b)·r values
// instead of a·b.
//
// Gradients of one dimension, and those whose factors would not be at
// least MinCompressionRate times smaller than the gradient, are
// all-reduced whole, with no residual. With r ≥ a the approximation is
// exact up to rounding (P is then an orthonormal basis of the a rows'
// space), so PowerSGD equals plain averaging.
//
// A PowerSGD is safe for concurrent use; it keeps nothing itself (the
// residuals and Q are each gradient's hvd.HookGradient state).
type PowerSGD struct {
	// Rank is r, the rank of the approximation (at least 1); a
	// gradient's is at most its a.
	Rank int
	// MinCompressionRate is how many times fewer values the factors must
	// have than the gradient for it to be compressed: a·b >
	// MinCompressionRate·(a+b)·r. 0 means 2.
	MinCompressionRate float64
	// Seed seeds each gradient's first Q (from the seed and the
	// gradient's name, so every rank draws the same).
	Seed uint64
	// WarmupSteps: each gradient's first exchanges after the optimizer is
	// bound to a job (each new formation of an elastic job, too) are
	// all-reduced whole (PyTorch's start_powerSGD_iter).
	WarmupSteps int
}

// String describes the hook ("powersgd(rank=4)").
func (c *PowerSGD) String() string { return fmt.Sprintf("powersgd(rank=%d)", c.Rank) }

// ReduceGradient implements hvd.GradientHook.
func (c *PowerSGD) ReduceGradient(ctx context.Context, g *hvd.HookGradient) error {
	if c.Rank < 1 {
		return fmt.Errorf("compress: PowerSGD rank %d must be at least 1", c.Rank)
	}
	m, ok := c.plan(g)
	if !ok || warmingUp(g, "powersgd.steps", c.WarmupSteps) {
		return g.Allreduce(ctx, "", g.Values)
	}
	resid, _ := g.State("powersgd.residual", len(g.Values))
	for i, v := range resid {
		g.Values[i] += v
	}
	q, fresh := g.State("powersgd.q", m.b*m.r)
	if fresh {
		c.initQ(q, g.Name)
	}
	p, _ := g.State("powersgd.p", m.a*m.r) // scratch, kept to spare the allocation
	m.timesQ(p, g.Values, q)               // P = M·Q
	if err := g.Allreduce(ctx, "p", p); err != nil {
		return err
	}
	orthonormalize(p, m.a, m.r)
	m.timesP(q, g.Values, p) // Q = Mᵀ·P, this rank's
	// The residual is what this rank's own compression leaves out:
	// M − P·Qᵀ with its own Q.
	m.product(resid, g.Values, p, q)
	if err := g.Allreduce(ctx, "q", q); err != nil {
		return err
	}
	m.product(g.Values, nil, p, q)
	return nil
}

// plan is the matrix view of g, and whether g is compressed.
func (c *PowerSGD) plan(g *hvd.HookGradient) (view, bool) {
	if len(g.Shape) < 2 || len(g.Values) == 0 || g.Shape[0] == 0 {
		return view{}, false
	}
	rows := g.Shape[0]
	cols := len(g.Values) / rows
	v := view{a: rows, b: cols, cols: cols}
	if rows > cols {
		v.a, v.b, v.t = cols, rows, true
	}
	v.r = min(c.Rank, v.a)
	rate := c.MinCompressionRate
	if rate == 0 {
		rate = 2
	}
	return v, float64(v.a)*float64(v.b) > rate*float64(v.a+v.b)*float64(v.r)
}

// initQ fills q with standard normal values drawn from the seed and name.
func (c *PowerSGD) initQ(q []float64, name string) {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(c.Seed, h.Sum64()))
	for i := range q {
		q[i] = rng.NormFloat64()
	}
}

// view is a gradient of rows×cols values, stored by rows, seen as the
// matrix A (a×b, a ≤ b): the gradient itself, or its transpose when t.
// P is a×r and Q b×r, both stored by rows.
type view struct {
	a, b, r int
	cols    int
	t       bool
}

// The products run on lowrank.go's kernels; rows×cols is the gradient's
// storage, and A is it (t false) or its transpose.

// timesQ writes A·Q into p (a×r).
func (v view) timesQ(p, m, q []float64) {
	rows := len(m) / v.cols
	if v.t { // P (cols×r) = Mᵀ·Q (rows×r)
		mulCols(p, m, q, rows, v.cols, v.r)
		return
	} // P (rows×r) = M·Q (cols×r)
	mulRows(p, m, q, rows, v.cols, v.r)
}

// timesP writes Aᵀ·P into q (b×r).
func (v view) timesP(q, m, p []float64) {
	rows := len(m) / v.cols
	if v.t { // Q (rows×r) = M·P (cols×r)
		mulRows(q, m, p, rows, v.cols, v.r)
		return
	} // Q (cols×r) = Mᵀ·P (rows×r)
	mulCols(q, m, p, rows, v.cols, v.r)
}

// product writes P·Qᵀ into dst, in the gradient's storage order; with
// from set, from − P·Qᵀ (from may be dst).
func (v view) product(dst, from, p, q []float64) {
	rows := len(dst) / v.cols
	if v.t { // M (rows×cols) = (P·Qᵀ)ᵀ = Q (rows×r)·Pᵀ
		p, q = q, p
	}
	mulOuter(dst, from, p, q, rows, v.cols, v.r)
}

// orthonormalize makes the r columns of p (rows×r, stored by rows)
// orthonormal with modified Gram–Schmidt, twice over each column (which
// keeps them orthogonal to rounding even when P is ill-conditioned). A
// zero column stays zero; one that depended on the earlier columns keeps
// only rounding, which becomes a unit column orthogonal to them (as
// good a basis vector as any: every rank computes the same one).
func orthonormalize(p []float64, rows, r int) {
	for c := range r {
		for range 2 {
			for d := range c {
				var dot float64
				for i := range rows {
					dot += p[i*r+c] * p[i*r+d]
				}
				for i := range rows {
					p[i*r+c] -= dot * p[i*r+d]
				}
			}
		}
		var norm float64
		for i := range rows {
			norm += p[i*r+c] * p[i*r+c]
		}
		norm = math.Sqrt(norm)
		for i := range rows {
			if norm == 0 {
				p[i*r+c] = 0
			} else {
				p[i*r+c] /= norm
			}
		}
	}
}
