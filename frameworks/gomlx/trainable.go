package hvdgomlx

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Trainable returns a backend that behaves as b, but that also has the
// operations which the gradients of GoMLX's convolution and pooling need,
// wherever b lacks them: Reverse (the gradient of graph.Convolve and
// layers.Convolution flips the kernel), Pad (that of strided slices and
// of sum or mean pooling) and SelectAndScatterMax/Min (that of
// graph.MaxPool and MinPool). Each is built from operations every GoMLX
// backend has (Slice, Concatenate, Reshape, BroadcastInDim, comparisons,
// Where, Add), so it runs inside the same compiled graph, on b.
//
// GoMLX v0.26.0's pure-Go backend, simplego, runs these layers forward
// but fails to differentiate them ("op not implemented in SimpleGo yet");
// with
//
//	plain, err := simplego.New("ops_sequential")
//	backend := hvdgomlx.Trainable(plain)
//
// a CNN of layers.Convolution and graph.MaxPool trains on it. Operations
// b has itself are b's, unchanged; Trainable(nil) is nil. Give simplego
// "ops_sequential" (simplego.New("parallelism=2,ops_sequential")): its
// parallel scheduler can deadlock when more operations that split their
// work (matrix products) run at once than it has goroutines for, and the
// convolutions here are matrix products.
//
// The composed operations are as exact as the originals: Reverse and Pad
// only move values, and SelectAndScatterMax gives each window's source
// value to the first maximum in row-major window order, as XLA's does,
// even where a window holds equal maxima. They cost more than native ones:
// Reverse makes one slice per element of a reversed axis (a kernel's few
// rows and columns), and SelectAndScatter one pass over the operand per
// element of the window. ConvGeneral is the backend's own, with empty
// strides and dilations passed as ones, which the gradient of
// graph.Convolve needs on simplego.
func Trainable(b backends.Backend) backends.Backend {
	if b == nil {
		return nil
	}
	caps := b.Capabilities().Clone()
	if caps.Operations == nil {
		caps.Operations = map[backends.OpType]bool{}
	}
	have := caps.Clone().Operations
	for _, op := range []backends.OpType{backends.OpTypeReverse, backends.OpTypePad,
		backends.OpTypeSelectAndScatterMax, backends.OpTypeSelectAndScatterMin} {
		caps.Operations[op] = true
	}
	return &trainable{Backend: b, caps: caps, have: have}
}

// trainable is the backend Trainable returns.
type trainable struct {
	backends.Backend
	caps backends.Capabilities
	have map[backends.OpType]bool // the wrapped backend's own operations
}

// Capabilities reports the wrapped backend's operations and the composed ones.
func (t *trainable) Capabilities() backends.Capabilities { return t.caps.Clone() }

// Builder returns the wrapped backend's builder with the composed operations.
func (t *trainable) Builder(name string) backends.Builder {
	return &composing{Builder: t.Backend.Builder(name), have: t.have}
}

// composing is a builder that composes the operations its own builder
// lacks; every other method is the embedded builder's.
type composing struct {
	backends.Builder
	have map[backends.OpType]bool
}

// ConvGeneral, on a backend that lacks Reverse (simplego), is computed as
// a matrix product: the input's patches, one strided slice of the padded
// input per kernel position (or one window per output position, where
// those are fewer, as in the convolutions that compute a kernel's
// gradient), joined along the channels, times the kernel as a [positions ×
// input channels, output channels] matrix, in one DotGeneral. simplego
// multiplies matrices several times faster than it runs its own
// ConvGeneral. Grouped convolutions go to the backend's own, with empty
// strides and dilations passed as ones: the gradient of graph.Convolve
// leaves them empty, which simplego v0.26.0's shape inference reads as a
// stride of 0 and refuses.
func (c *composing) ConvGeneral(input, kernel backends.Op, axes backends.ConvolveAxesConfig, strides []int, paddings [][2]int,
	inputDilations, kernelDilations []int, channelGroupCount, batchGroupCount int) (backends.Op, error) {
	n := len(axes.InputSpatial)
	ones := func(s []int) []int {
		if len(s) != 0 {
			return s
		}
		s = make([]int, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	strides, inputDilations, kernelDilations = ones(strides), ones(inputDilations), ones(kernelDilations)
	if c.have[backends.OpTypeReverse] || channelGroupCount > 1 || batchGroupCount > 1 {
		return c.Builder.ConvGeneral(input, kernel, axes, strides, paddings, inputDilations, kernelDilations,
			channelGroupCount, batchGroupCount)
	}
	return c.convByProduct(input, kernel, axes, strides, paddings, inputDilations, kernelDilations)
}

// convByProduct is ConvGeneral as patches times kernel (see ConvGeneral).
func (c *composing) convByProduct(input, kernel backends.Op, axes backends.ConvolveAxesConfig, strides []int, paddings [][2]int,
	inputDilations, kernelDilations []int) (backends.Op, error) {
	ishape, err := c.OpShape(input)
	if err != nil {
		return nil, err
	}
	kshape, err := c.OpShape(kernel)
	if err != nil {
		return nil, err
	}
	n := len(axes.InputSpatial)
	if ishape.Rank() != n+2 || kshape.Rank() != n+2 || len(axes.KernelSpatial) != n || len(axes.OutputSpatial) != n ||
		len(strides) != n || len(inputDilations) != n || len(kernelDilations) != n || (len(paddings) != 0 && len(paddings) != n) {
		return nil, fmt.Errorf("ConvGeneral: input %s, kernel %s, axes %+v, strides %v, paddings %v, dilations %v and %v do not agree",
			ishape, kshape, axes, strides, paddings, inputDilations, kernelDilations)
	}
	cin := ishape.Dimensions[axes.InputChannels]
	if k := kshape.Dimensions[axes.KernelInputChannels]; k != cin {
		return nil, fmt.Errorf("ConvGeneral: input %s has %d channels, kernel %s takes %d", ishape, cin, kshape, k)
	}
	cout, batch := kshape.Dimensions[axes.KernelOutputChannels], ishape.Dimensions[axes.InputBatch]

	// The input as [batch, spatial…, channels], dilated and padded.
	perm := append(append([]int{axes.InputBatch}, axes.InputSpatial...), axes.InputChannels)
	x, err := c.Transpose(input, perm...)
	if err != nil {
		return nil, err
	}
	zero, err := c.scalar(0, ishape.DType)
	if err != nil {
		return nil, err
	}
	cfg := make([]backends.PadAxis, n+2)
	for i := range n {
		cfg[1+i].Interior = inputDilations[i] - 1
		if len(paddings) != 0 {
			cfg[1+i].Start, cfg[1+i].End = paddings[i][0], paddings[i][1]
		}
	}
	if x, err = c.Pad(x, zero, cfg...); err != nil {
		return nil, err
	}
	xshape, err := c.OpShape(x)
	if err != nil {
		return nil, err
	}

	// Sizes: kernel positions ks (with their dilation: reach), outputs os.
	ks, os := make([]int, n), make([]int, n)
	positions, outputs := 1, 1
	for i := range n {
		ks[i] = kshape.Dimensions[axes.KernelSpatial[i]]
		reach := (ks[i]-1)*kernelDilations[i] + 1
		if strides[i] < 1 || kernelDilations[i] < 1 || inputDilations[i] < 1 || xshape.Dimensions[1+i] < reach {
			return nil, fmt.Errorf("ConvGeneral: input %s, kernel %s, strides %v, paddings %v, dilations %v and %v: no output",
				ishape, kshape, strides, paddings, inputDilations, kernelDilations)
		}
		os[i] = (xshape.Dimensions[1+i]-reach)/strides[i] + 1
		positions, outputs = positions*ks[i], outputs*os[i]
	}

	// The patches [batch, outputs…, positions·channels], position-major.
	var patches backends.Op
	starts, limits, steps := make([]int, n+2), make([]int, n+2), make([]int, n+2)
	steps[0], steps[n+1] = 1, 1
	limits[0], limits[n+1] = batch, cin
	if positions <= outputs {
		parts := make([]backends.Op, 0, positions)
		for k := make([]int, n); ; {
			for i := range n {
				starts[1+i] = k[i] * kernelDilations[i]
				limits[1+i] = starts[1+i] + (os[i]-1)*strides[i] + 1
				steps[1+i] = strides[i]
			}
			part, err := c.slices(x, starts, limits, steps)
			if err != nil {
				return nil, err
			}
			if parts = append(parts, part); !next(k, ks) {
				break
			}
		}
		if patches, err = c.Concatenate(n+1, parts...); err != nil {
			return nil, err
		}
	} else {
		parts := make([]backends.Op, 0, outputs)
		for o := make([]int, n); ; {
			for i := range n {
				starts[1+i] = o[i] * strides[i]
				limits[1+i] = starts[1+i] + (ks[i]-1)*kernelDilations[i] + 1
				steps[1+i] = kernelDilations[i]
			}
			part, err := c.slices(x, starts, limits, steps)
			if err == nil {
				part, err = c.Reshape(part, batch, 1, positions*cin)
			}
			if err != nil {
				return nil, err
			}
			if parts = append(parts, part); !next(o, os) {
				break
			}
		}
		if patches, err = c.Concatenate(1, parts...); err != nil {
			return nil, err
		}
		if patches, err = c.Reshape(patches, append(append([]int{batch}, os...), positions*cin)...); err != nil {
			return nil, err
		}
	}

	// The kernel as [positions·channels, output channels], and the product.
	w, err := c.Transpose(kernel, append(append([]int(nil), axes.KernelSpatial...), axes.KernelInputChannels, axes.KernelOutputChannels)...)
	if err == nil {
		w, err = c.Reshape(w, positions*cin, cout)
	}
	if err != nil {
		return nil, err
	}
	out, err := c.DotGeneral(patches, []int{n + 1}, nil, w, []int{0}, nil)
	if err != nil {
		return nil, err
	}
	// From [batch, outputs…, channels] to the configured output axes.
	operm := make([]int, n+2)
	operm[axes.OutputBatch], operm[axes.OutputChannels] = 0, n+1
	for i, a := range axes.OutputSpatial {
		operm[a] = 1 + i
	}
	return c.Transpose(out, operm...)
}

// slices is Slice with copies of its arguments, which the caller reuses
// (a builder may keep them, as simplego does).
func (c *composing) slices(x backends.Op, starts, limits, steps []int) (backends.Op, error) {
	return c.Slice(x, slices.Clone(starts), slices.Clone(limits), slices.Clone(steps))
}

// next advances idx through dims in row-major order; false after the last.
func next(idx, dims []int) bool {
	for a := len(dims) - 1; a >= 0; a-- {
		if idx[a]++; idx[a] < dims[a] {
			return true
		}
		idx[a] = 0
	}
	return false
}

// Reverse reverses x along axes: one slice per element of each axis,
// concatenated in the opposite order.
func (c *composing) Reverse(x backends.Op, axes ...int) (backends.Op, error) {
	if c.have[backends.OpTypeReverse] {
		return c.Builder.Reverse(x, axes...)
	}
	shape, err := c.OpShape(x)
	if err != nil {
		return nil, err
	}
	dims := shape.Dimensions
	for _, axis := range axes {
		if axis < 0 || axis >= len(dims) {
			return nil, fmt.Errorf("Reverse: axis %d out of range for shape %s", axis, shape)
		}
		n := dims[axis]
		if n <= 1 {
			continue
		}
		parts := make([]backends.Op, n)
		for i := range n {
			starts, limits := make([]int, len(dims)), append([]int(nil), dims...)
			starts[axis], limits[axis] = n-1-i, n-i
			if parts[i], err = c.slice(x, starts, limits); err != nil {
				return nil, err
			}
		}
		if x, err = c.Concatenate(axis, parts...); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// Pad pads x with the scalar fill: per axis first Interior copies of fill
// between neighbours, then Start before and End after, where a negative
// Start or End removes that many elements instead, as XLA's Pad does.
func (c *composing) Pad(x, fill backends.Op, axesConfig ...backends.PadAxis) (backends.Op, error) {
	if c.have[backends.OpTypePad] {
		return c.Builder.Pad(x, fill, axesConfig...)
	}
	shape, err := c.OpShape(x)
	if err != nil {
		return nil, err
	}
	if len(axesConfig) > shape.Rank() {
		return nil, fmt.Errorf("Pad: %d axes configured for shape %s", len(axesConfig), shape)
	}
	for axis, pc := range axesConfig {
		if pc.Interior < 0 {
			return nil, fmt.Errorf("Pad: negative interior padding %d on axis %d", pc.Interior, axis)
		}
		if x, err = c.interior(x, fill, axis, pc.Interior); err != nil {
			return nil, err
		}
		if x, err = c.edge(x, fill, axis, pc.Start, true); err != nil {
			return nil, err
		}
		if x, err = c.edge(x, fill, axis, pc.End, false); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// interior puts k copies of fill between neighbours along axis: x [… n …]
// becomes [… n, 1 …], is joined with fill [… n, k …] along the new axis,
// reshaped to [… n·(k+1) …] and cut after its last element.
func (c *composing) interior(x, fill backends.Op, axis, k int) (backends.Op, error) {
	shape, err := c.OpShape(x)
	if err != nil {
		return nil, err
	}
	n := shape.Dimensions[axis]
	if k == 0 || n <= 1 {
		return x, nil
	}
	split := make([]int, 0, shape.Rank()+1)
	split = append(append(append(split, shape.Dimensions[:axis+1]...), 1), shape.Dimensions[axis+1:]...)
	if x, err = c.Reshape(x, split...); err != nil {
		return nil, err
	}
	gapDims := append([]int(nil), split...)
	gapDims[axis+1] = k
	gaps, err := c.filled(fill, shape.DType, gapDims)
	if err != nil {
		return nil, err
	}
	if x, err = c.Concatenate(axis+1, x, gaps); err != nil {
		return nil, err
	}
	merged := append([]int(nil), shape.Dimensions...)
	merged[axis] = n * (k + 1)
	if x, err = c.Reshape(x, merged...); err != nil {
		return nil, err
	}
	limits := append([]int(nil), merged...)
	limits[axis] = (n-1)*(k+1) + 1
	return c.slice(x, make([]int, len(merged)), limits)
}

// edge adds k copies of fill before (start) or after the elements of axis,
// or removes -k of them where k is negative.
func (c *composing) edge(x, fill backends.Op, axis, k int, start bool) (backends.Op, error) {
	if k == 0 {
		return x, nil
	}
	shape, err := c.OpShape(x)
	if err != nil {
		return nil, err
	}
	dims := shape.Dimensions
	if k < 0 {
		if -k > dims[axis] {
			return nil, fmt.Errorf("Pad: removing %d elements from axis %d of shape %s", -k, axis, shape)
		}
		starts, limits := make([]int, len(dims)), append([]int(nil), dims...)
		if start {
			starts[axis] = -k
		} else {
			limits[axis] += k
		}
		return c.slice(x, starts, limits)
	}
	blockDims := append([]int(nil), dims...)
	blockDims[axis] = k
	block, err := c.filled(fill, shape.DType, blockDims)
	if err != nil {
		return nil, err
	}
	if start {
		return c.Concatenate(axis, block, x)
	}
	return c.Concatenate(axis, x, block)
}

// slice is Slice with unit strides.
func (c *composing) slice(x backends.Op, starts, limits []int) (backends.Op, error) {
	strides := make([]int, len(starts))
	for i := range strides {
		strides[i] = 1
	}
	return c.Slice(x, starts, limits, strides)
}

// filled is the scalar fill broadcast to dims.
func (c *composing) filled(fill backends.Op, dtype dtypes.DType, dims []int) (backends.Op, error) {
	return c.BroadcastInDim(fill, shapes.Make(dtype, dims...), nil)
}

// SelectAndScatterMax gives each window's source value to the window's
// largest operand element (the first of equal ones), summing where
// windows overlap.
func (c *composing) SelectAndScatterMax(operand, source backends.Op, windowDimensions, windowStrides []int, paddings [][2]int) (backends.Op, error) {
	if c.have[backends.OpTypeSelectAndScatterMax] {
		return c.Builder.SelectAndScatterMax(operand, source, windowDimensions, windowStrides, paddings)
	}
	return c.selectAndScatter(operand, source, windowDimensions, windowStrides, paddings, true)
}

// SelectAndScatterMin is SelectAndScatterMax for the smallest element.
func (c *composing) SelectAndScatterMin(operand, source backends.Op, windowDimensions, windowStrides []int, paddings [][2]int) (backends.Op, error) {
	if c.have[backends.OpTypeSelectAndScatterMin] {
		return c.Builder.SelectAndScatterMin(operand, source, windowDimensions, windowStrides, paddings)
	}
	return c.selectAndScatter(operand, source, windowDimensions, windowStrides, paddings, false)
}

// selectAndScatter pads the operand with the value no window selects
// (−∞ for the maximum, +∞ for the minimum), and takes one strided slice
// of it per offset in the window, each the shape of source: element o of
// every window. The windows' extreme is their element-wise Max (Min);
// going through the offsets in row-major order, an offset whose element
// equals it and which no earlier offset took gets the source value. Its
// values go back to their operand positions by the inverse of the slice
// (interior and edge padding with zeros); they are summed, and the
// operand's padding is cut off.
func (c *composing) selectAndScatter(operand, source backends.Op, window, strides []int, paddings [][2]int, isMax bool) (backends.Op, error) {
	name := "SelectAndScatterMin"
	if isMax {
		name = "SelectAndScatterMax"
	}
	oshape, err := c.OpShape(operand)
	if err != nil {
		return nil, err
	}
	sshape, err := c.OpShape(source)
	if err != nil {
		return nil, err
	}
	rank, dtype := oshape.Rank(), oshape.DType
	if !dtype.IsFloat() {
		return nil, fmt.Errorf("%s: composed for floating-point operands only, got %s", name, dtype)
	}
	if len(window) != rank || len(strides) != rank || (len(paddings) != 0 && len(paddings) != rank) || sshape.Rank() != rank {
		return nil, fmt.Errorf("%s: operand %s, source %s, window %v, strides %v, paddings %v: ranks differ",
			name, oshape, sshape, window, strides, paddings)
	}
	if sshape.DType != dtype {
		return nil, fmt.Errorf("%s: operand is %s, source %s", name, dtype, sshape.DType)
	}
	pad := make([][2]int, rank)
	copy(pad, paddings)
	padded := make([]int, rank)
	for a := range rank {
		if window[a] < 1 || strides[a] < 1 || pad[a][0] < 0 || pad[a][1] < 0 {
			return nil, fmt.Errorf("%s: window %v, strides %v, paddings %v: window and strides must be positive and paddings not negative",
				name, window, strides, paddings)
		}
		padded[a] = oshape.Dimensions[a] + pad[a][0] + pad[a][1]
		if want := (padded[a]-window[a])/strides[a] + 1; padded[a] < window[a] || sshape.Dimensions[a] != want {
			return nil, fmt.Errorf("%s: source %s does not match the windows of operand %s (axis %d: want %d)",
				name, sshape, oshape, a, want)
		}
	}

	// The operand, padded with a value no window selects.
	far := math.Inf(-1)
	if !isMax {
		far = math.Inf(1)
	}
	farOp, err := c.scalar(far, dtype)
	if err != nil {
		return nil, err
	}
	cfg := make([]backends.PadAxis, rank)
	for a := range rank {
		cfg[a] = backends.PadAxis{Start: pad[a][0], End: pad[a][1]}
	}
	x, err := c.Pad(operand, farOp, cfg...)
	if err != nil {
		return nil, err
	}

	// One strided slice per offset in the window, in row-major order.
	var offsets [][]int
	for o := make([]int, rank); ; {
		if offsets = append(offsets, slices.Clone(o)); !next(o, window) {
			break
		}
	}
	taps := make([]backends.Op, len(offsets))
	var extreme backends.Op
	for i, o := range offsets {
		limits := make([]int, rank)
		for a := range rank {
			limits[a] = o[a] + (sshape.Dimensions[a]-1)*strides[a] + 1
		}
		if taps[i], err = c.Slice(x, o, limits, strides); err != nil {
			return nil, err
		}
		switch {
		case i == 0:
			extreme = taps[0]
		case isMax:
			extreme, err = c.Max(extreme, taps[i])
		default:
			extreme, err = c.Min(extreme, taps[i])
		}
		if err != nil {
			return nil, err
		}
	}

	zero, err := c.scalar(0, dtype)
	if err != nil {
		return nil, err
	}
	zeros, err := c.filled(zero, dtype, sshape.Dimensions)
	if err != nil {
		return nil, err
	}
	var taken, sum backends.Op // taken: bool, an earlier offset was selected
	for i, o := range offsets {
		sel, err := c.Equal(taps[i], extreme)
		if err != nil {
			return nil, err
		}
		if taken != nil {
			free, err := c.LogicalNot(taken)
			if err != nil {
				return nil, err
			}
			if sel, err = c.LogicalAnd(sel, free); err != nil {
				return nil, err
			}
			if taken, err = c.LogicalOr(taken, sel); err != nil {
				return nil, err
			}
		} else {
			taken = sel
		}
		part, err := c.Where(sel, source, zeros)
		if err != nil {
			return nil, err
		}
		// Back to the padded operand's positions: element j of the slice
		// was at o + j·stride.
		back := make([]backends.PadAxis, rank)
		for a := range rank {
			last := o[a] + (sshape.Dimensions[a]-1)*strides[a]
			back[a] = backends.PadAxis{Start: o[a], End: padded[a] - 1 - last, Interior: strides[a] - 1}
		}
		if part, err = c.Pad(part, zero, back...); err != nil {
			return nil, err
		}
		if sum == nil {
			sum = part
		} else if sum, err = c.Add(sum, part); err != nil {
			return nil, err
		}
	}
	for a := range rank {
		cfg[a] = backends.PadAxis{Start: -pad[a][0], End: -pad[a][1]}
	}
	return c.Pad(sum, zero, cfg...)
}

// scalar is the constant v of dtype.
func (c *composing) scalar(v float64, dtype dtypes.DType) (backends.Op, error) {
	op, err := c.Constant([]float64{v})
	if err != nil || dtype == dtypes.Float64 {
		return op, nil
	}
	return c.ConvertDType(op, dtype)
}
