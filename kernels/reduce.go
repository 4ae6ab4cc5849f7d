package kernels

import "fmt"

// ReduceFunc combines src into dst element-wise: dst[i] = op(dst[i], src[i]).
// Both slices hold the same whole number of elements of the function's
// DType and are suitably aligned (as make and AsBytes give); the caller
// guarantees this, so a ReduceFunc does no checking of its own. dst and src
// may be the same slice but must not otherwise overlap.
type ReduceFunc func(dst, src []byte)

// reducers is the dispatch table, indexed by DType and then by Op (after
// Average has been mapped to Sum). It is never written after initialisation.
var reducers = [...][Prod + 1]ReduceFunc{
	F32:  loopReducers[float32](sumF32),
	F64:  loopReducers[float64](sumF64),
	F16:  halfReducers(F16),
	BF16: halfReducers(BF16),
	I32:  loopReducers[int32](nil),
	I64:  loopReducers[int64](nil),
	U8:   loopReducers[uint8](nil),
}

// Lookup returns the element-wise reducer for dt and op. Average reduces as
// Sum (the caller scales afterwards). An invalid dt or op, or Adasum (not
// element-wise), gives an error wrapping ErrDType or ErrOp.
func Lookup(dt DType, op Op) (ReduceFunc, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: %v", ErrDType, dt)
	}
	if !op.ElementWise() {
		if op.Valid() {
			return nil, fmt.Errorf("%w: %v is not element-wise", ErrOp, op)
		}
		return nil, fmt.Errorf("%w: %v", ErrOp, op)
	}
	return reducers[dt][op.Reduction()], nil
}

// Reduce computes dst[i] = op(dst[i], src[i]) for buffers of element type dt.
// Besides the errors of Lookup, it returns one wrapping ErrLength unless dst
// and src have the same length and hold a whole number of elements, and one
// wrapping ErrAlign if either does not start at a multiple of the element
// size. dst and src may be the same slice but must not otherwise overlap.
func Reduce(dt DType, op Op, dst, src []byte) error {
	f, err := Lookup(dt, op)
	if err != nil {
		return err
	}
	what := "reduce " + op.String()
	if len(dst) != len(src) {
		return fmt.Errorf("%w: %s: dst has %d bytes, src has %d", ErrLength, what, len(dst), len(src))
	}
	if err := checkElems(what, dt, dst); err != nil {
		return err
	}
	if err := checkElems(what, dt, src); err != nil {
		return err
	}
	f(dst, src)
	return nil
}

// typed adapts a loop over typed slices to a ReduceFunc over raw bytes.
func typed[T Element](loop func(dst, src []T)) ReduceFunc {
	return func(dst, src []byte) { loop(FromBytes[T](dst), FromBytes[T](src)) }
}

// loopReducers returns the reducers of a type with native arithmetic, using
// sum instead of the plain loop when it is not nil.
func loopReducers[T int32 | int64 | uint8 | float32 | float64](sum ReduceFunc) [Prod + 1]ReduceFunc {
	if sum == nil {
		sum = typed(sumLoop[T])
	}
	return [Prod + 1]ReduceFunc{Sum: sum, Min: typed(minLoop[T]), Max: typed(maxLoop[T]), Prod: typed(prodLoop[T])}
}
