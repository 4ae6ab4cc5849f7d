package main

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
)

// cnn is the model, built from GoMLX's own layers and operations: two
// blocks of 3×3 convolution (layers.Convolution, 8 and 16 channels, "same"
// padding, with bias), ReLU and 2×2 max-pooling (graph.MaxPool, stride 2),
// then a dense layer of 64 units and the 10 logits. inputs[0] is [batch,
// 28, 28, 1] float32 in [0, 1].
//
// On GoMLX v0.26.0's pure-Go backend (simplego) the convolution and the
// pooling train only on hvdgomlx.Trainable(backend), which adds the
// operations their gradients need (Reverse, SelectAndScatterMax); main
// and the tests wrap the backend so.
func cnn(ctx *context.Context, _ any, inputs []*graph.Node) []*graph.Node {
	x := inputs[0]
	for i, channels := range []int{8, 16} {
		x = layers.Convolution(ctx.Inf("conv%d", i), x).Filters(channels).KernelSize(3).PadSame().Done()
		x = activations.Relu(x)
		x = graph.MaxPool(x).Window(2).Done()
	}
	x = graph.Reshape(x, x.Shape().Dimensions[0], -1)
	x = activations.Relu(layers.DenseWithBias(ctx.In("dense"), x, 64))
	return []*graph.Node{layers.DenseWithBias(ctx.In("logits"), x, classes)}
}
