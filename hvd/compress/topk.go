package compress

import (
	"context"
	"fmt"
	"math"

	"github.com/gorovod/gorovod/hvd"
)

// TopK sends, from each rank, only the k values of its gradient (plus
// residual) of the largest magnitude, k = ⌈Fraction·length⌉ (at least 1),
// and keeps the others as the residual it adds to the next step's
// gradient (error feedback; Stich, Cordonnier and Jaggi, "Sparsified SGD
// with memory", 2018). The ranks exchange their (index, value) pairs with
// one all-gather ("grad/<name>/topk", 2k float64 values a rank) and each
// adds them up, in rank order, so every rank has the same result. With
// Fraction 1 it is plain averaging, up to the order of the additions.
//
// An all-gather cannot run while a rank has joined (hvd.ErrJoined), so
// TopK does not work with Join. A TopK is safe for concurrent use; it keeps
// nothing itself.
type TopK struct {
	// Fraction is the share of each gradient's values a rank sends, in
	// (0, 1].
	Fraction float64
	// MinLen: gradients of fewer values are all-reduced whole, with no
	// residual (0: every gradient is sparsified).
	MinLen int
	// WarmupSteps: each gradient's first exchanges after the optimizer is
	// bound to a job (each new formation of an elastic job, too) are
	// all-reduced whole, as the dense start of Lin et al.'s Deep Gradient
	// Compression (2018) and PyTorch's start_powerSGD_iter do.
	WarmupSteps int
	// Momentum, when not 0, is Deep Gradient Compression's momentum
	// correction (Lin, Han, Mao, Wang and Dally, 2018): each rank keeps
	// its velocity u ← Momentum·u + gradient and accumulates u, not the
	// gradient, into the residual; a value sent leaves both its residual
	// and its velocity (momentum factor masking). The sum is then the
	// step to take: wrap an optimizer without momentum of its own (SGD
	// with Momentum 0). Gradients sent whole (MinLen, WarmupSteps) send
	// their velocity.
	Momentum float64
}

// String describes the hook ("topk(0.01)").
func (c *TopK) String() string { return fmt.Sprintf("topk(%g)", c.Fraction) }

// ReduceGradient implements hvd.GradientHook.
func (c *TopK) ReduceGradient(ctx context.Context, g *hvd.HookGradient) error {
	if !(c.Fraction > 0 && c.Fraction <= 1) {
		return fmt.Errorf("compress: top-k fraction %v must be in (0, 1]", c.Fraction)
	}
	n := len(g.Values)
	var u []float64 // the velocity (Momentum)
	if c.Momentum != 0 {
		u, _ = g.State("topk.velocity", n)
		for i, v := range g.Values {
			u[i] = c.Momentum*u[i] + v
		}
	}
	if n == 0 || n < c.MinLen || warmingUp(g, "topk.steps", c.WarmupSteps) {
		if u != nil {
			copy(g.Values, u)
		}
		return g.Allreduce(ctx, "", g.Values)
	}
	k := min(n, max(1, int(math.Ceil(c.Fraction*float64(n)))))
	resid, _ := g.State("topk.residual", n)
	if u == nil {
		u = g.Values
	}
	for i, v := range u {
		resid[i] += v // the residual becomes M, then loses the values sent
	}
	scratch, _ := g.State("topk.scratch", n) // kept to spare the allocation
	pairs, _ := g.State("topk.pairs", 2*k)
	pairs = pairs[:0]
	t := kthLargest(resid, k, scratch)
	for i, v := range resid { // above the threshold first, then ties at it
		if math.Abs(v) > t {
			pairs = append(pairs, float64(i), v)
		}
	}
	for i, v := range resid {
		if len(pairs) == 2*k {
			break
		}
		if math.Abs(v) == t {
			pairs = append(pairs, float64(i), v)
		}
	}
	for i := 0; i < len(pairs); i += 2 {
		resid[int(pairs[i])] = 0
		if c.Momentum != 0 {
			u[int(pairs[i])] = 0
		}
	}
	all, err := g.Allgather(ctx, "topk", pairs)
	if err != nil {
		return err
	}
	clear(g.Values)
	for i := 0; i+1 < len(all); i += 2 {
		x := all[i]
		if !(x >= 0 && x < float64(n)) || x != math.Trunc(x) {
			return fmt.Errorf("compress: top-k of %q received index %v of %d values", g.Name, x, n)
		}
		g.Values[int(x)] += all[i+1]
	}
	return nil
}

// kthLargest is the k-th largest magnitude in v (1 ≤ k ≤ len(v)), found
// by quickselect on a copy in a (of v's length).
func kthLargest(v []float64, k int, a []float64) float64 {
	for i, x := range v {
		a[i] = math.Abs(x)
	}
	want := len(a) - k // its index in ascending order
	lo, hi := 0, len(a)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// median of three as the pivot, moved to hi
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[mid] < a[hi] {
			a[mid], a[hi] = a[hi], a[mid]
		}
		pivot := a[hi]
		// three-way partition: < pivot, == pivot, > pivot
		lt, i, gt := lo, lo, hi
		for i <= gt {
			switch {
			case a[i] < pivot:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case a[i] > pivot:
				a[i], a[gt] = a[gt], a[i]
				gt--
			default:
				i++
			}
		}
		switch {
		case want < lt:
			hi = lt - 1
		case want > gt:
			lo = gt + 1
		default:
			return pivot
		}
	}
	return a[want]
}

// warmingUp counts g's exchanges in its state key and says whether this
// one is among the first steps.
func warmingUp(g *hvd.HookGradient, key string, steps int) bool {
	if steps <= 0 {
		return false
	}
	n, _ := g.State(key, 1)
	if n[0] >= float64(steps) {
		return false
	}
	n[0]++
	return true
}
