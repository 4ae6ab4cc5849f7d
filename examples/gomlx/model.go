package main

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
)

// cnn is the model, built from GoMLX's graph operations and layers: two
// blocks of 3×3 convolution (8 and 16 channels), ReLU and 2×2
// max-pooling, then a dense layer of 64 units and the 10 logits. inputs[0]
// is [batch, 28, 28, 1] float32 in [0, 1].
//
// On GoMLX v0.26.0's pure-Go backend (simplego), layers.Convolution and
// graph.MaxPool run forward but cannot train: the gradient of a
// convolution uses the Reverse operation and that of MaxPool
// SelectAndScatterMax, neither implemented there (nor Pad, which the
// gradient of Slice uses). So the convolution gathers each pixel's 3×3
// neighbourhood (graph.Gather, whose gradient is a ScatterSum) and applies
// layers.DenseWithBias to it, and the pooling is a reshape and a
// ReduceMax. TestConvMatchesGoMLXConvolve checks the convolution against
// graph.Convolve.
func cnn(ctx *context.Context, _ any, inputs []*graph.Node) []*graph.Node {
	x := inputs[0]
	for i, channels := range []int{8, 16} {
		x = conv3x3(ctx.Inf("conv%d", i), x, channels)
		x = activations.Relu(x)
		x = maxPool2(x)
	}
	x = graph.Reshape(x, x.Shape().Dimensions[0], -1)
	x = activations.Relu(layers.DenseWithBias(ctx.In("dense"), x, 64))
	return []*graph.Node{layers.DenseWithBias(ctx.In("logits"), x, classes)}
}

// conv3x3 is a 3×3 convolution of x [batch, h, w, c] into filters
// channels, stride 1, zero padding that keeps h and w ("same"), with a
// bias. Its kernel is the weights [9·c, filters] of a dense layer, the
// neighbour (dy, dx) of channel ch at row (3·dy+dx)·c+ch.
func conv3x3(ctx *context.Context, x *graph.Node, filters int) *graph.Node {
	return layers.DenseWithBias(ctx, patches3x3(x), filters)
}

// patches3x3 returns, for x [batch, h, w, c], the 3×3 neighbourhoods
// [batch, h, w, 9·c] (zeros outside the image).
func patches3x3(x *graph.Node) *graph.Node {
	g := x.Graph()
	d := x.Shape().Dimensions
	b, h, w, c := d[0], d[1], d[2], d[3]
	idx := make([]int32, 0, h*w*9)
	mask := make([]float32, 0, h*w*9)
	for y := range h {
		for xx := range w {
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					yy, xs := y+dy, xx+dx
					if yy < 0 || yy >= h || xs < 0 || xs >= w {
						idx, mask = append(idx, 0), append(mask, 0)
						continue
					}
					idx, mask = append(idx, int32(yy*w+xs)), append(mask, 1)
				}
			}
		}
	}
	pixels := graph.TransposeAllDims(graph.Reshape(x, b, h*w, c), 1, 0, 2)  // [h·w, b, c]
	p := graph.Gather(pixels, graph.Reshape(graph.Const(g, idx), h*w*9, 1)) // [h·w·9, b, c]
	p = graph.Mul(p, graph.ConvertDType(graph.Reshape(graph.Const(g, mask), h*w*9, 1, 1), x.DType()))
	p = graph.TransposeAllDims(graph.Reshape(p, h, w, 9, b, c), 3, 0, 1, 2, 4) // [b, h, w, 9, c]
	return graph.Reshape(p, b, h, w, 9*c)
}

// maxPool2 is 2×2 max-pooling with stride 2 of x [batch, h, w, c] (h and w
// even), built as a reshape and a ReduceMax.
func maxPool2(x *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	x = graph.Reshape(x, d[0], d[1]/2, 2, d[2]/2, 2, d[3])
	return graph.ReduceMax(x, 2, 4)
}
