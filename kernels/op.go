package kernels

import (
	"fmt"
	"strings"
)

// Op is a reduction operator.
type Op uint8

// The reduction operators. Average reduces as Sum; the caller (the collective
// layer) then scales the result by 1/n, folded into the postscale factor.
//
// Adasum is not element-wise: it is the adaptive summation of Horovod's
// op=Adasum, which combines whole vectors with coefficients made of their
// dot products and norms (collective.Comm.AllreduceAdasum). It applies to
// float32 and float64 all-reduces only; Lookup and Reduce refuse it.
const (
	Sum Op = iota + 1
	Min
	Max
	Prod
	Average
	Adasum
)

var opNames = [...]string{Sum: "sum", Min: "min", Max: "max", Prod: "prod", Average: "avg", Adasum: "adasum"}

// Ops lists every element-wise Op (every valid Op but Adasum), for table
// tests of the reductions and flag help.
var Ops = []Op{Sum, Min, Max, Prod, Average}

// Valid reports whether o is a defined operator, Adasum included.
func (o Op) Valid() bool { return o >= Sum && o <= Adasum }

// ElementWise reports whether o reduces element by element (every valid
// Op but Adasum): the operators Lookup has a ReduceFunc for.
func (o Op) ElementWise() bool { return o >= Sum && o <= Average }

// String returns the short lower-case name ("sum", "avg", ...).
func (o Op) String() string {
	if !o.Valid() {
		return fmt.Sprintf("op(%d)", uint8(o))
	}
	return opNames[o]
}

// Reduction is the operator actually applied element-wise: Average becomes Sum.
func (o Op) Reduction() Op {
	if o == Average {
		return Sum
	}
	return o
}

// ParseOp accepts "sum", "min", "max", "prod", "avg"/"average" and
// "adasum", case-insensitively.
func ParseOp(s string) (Op, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "average", "mean":
		return Average, nil
	case "adasum":
		return Adasum, nil
	}
	for _, o := range Ops {
		if s == opNames[o] {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want one of sum, min, max, prod, avg, adasum)", ErrOp, s)
}
