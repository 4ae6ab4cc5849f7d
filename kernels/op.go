package kernels

import (
	"fmt"
	"strings"
)

// Op is a reduction operator.
type Op uint8

// The reduction operators. Average reduces as Sum; the caller (the collective
// layer) then scales the result by 1/n, folded into the postscale factor.
const (
	Sum Op = iota + 1
	Min
	Max
	Prod
	Average
)

var opNames = [...]string{Sum: "sum", Min: "min", Max: "max", Prod: "prod", Average: "avg"}

// Ops lists every valid Op, for table tests and flag help.
var Ops = []Op{Sum, Min, Max, Prod, Average}

// Valid reports whether o is a defined operator.
func (o Op) Valid() bool { return o >= Sum && o <= Average }

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

// ParseOp accepts "sum", "min", "max", "prod" and "avg"/"average", case-insensitively.
func ParseOp(s string) (Op, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "average" || s == "mean" {
		return Average, nil
	}
	for _, o := range Ops {
		if s == opNames[o] {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want one of sum, min, max, prod, avg)", ErrOp, s)
}
