package main

import "fmt"

// tensorSpec is one trainable tensor of the benchmark model.
type tensorSpec struct {
	name  string
	size  int
	shape []int // PyTorch's shape, outermost first (nil: a vector), for gradient hooks
}

// resnet50 lists the trainable tensors of ResNet-50 (ImageNet, 1000
// classes) in forward order: 53 convolutions with a batch-norm scale and
// shift each, and the final dense layer — 161 tensors, 25,557,032
// parameters, the gradient sizes Horovod's synthetic benchmark sends.
func resnet50() []tensorSpec {
	var ts []tensorSpec
	conv := func(name string, k, cin, cout int) {
		ts = append(ts, tensorSpec{name + ".w", k * k * cin * cout, []int{cout, cin, k, k}},
			tensorSpec{name + ".bn.gamma", cout, nil}, tensorSpec{name + ".bn.beta", cout, nil})
	}
	conv("conv1", 7, 3, 64)
	in := 64
	for s, blocks := range []int{3, 4, 6, 3} {
		width := 64 << s
		for b := range blocks {
			p := fmt.Sprintf("layer%d.%d", s+1, b)
			conv(p+".conv1", 1, in, width)
			conv(p+".conv2", 3, width, width)
			conv(p+".conv3", 1, width, 4*width)
			if b == 0 {
				conv(p+".downsample", 1, in, 4*width)
			}
			in = 4 * width
		}
	}
	return append(ts, tensorSpec{"fc.w", in * 1000, []int{1000, in}}, tensorSpec{"fc.b", 1000, nil})
}

// uniform is a model of n tensors sharing params parameters as evenly as
// possible.
func uniform(params, n int) []tensorSpec {
	ts := make([]tensorSpec, n)
	for i := range ts {
		ts[i] = tensorSpec{name: fmt.Sprintf("layer%d.w", i), size: params / n}
		if i < params%n {
			ts[i].size++
		}
	}
	return ts
}

// modelSpec returns the tensors of the named model.
func modelSpec(name string, params, tensors int) ([]tensorSpec, error) {
	switch name {
	case "resnet50":
		return resnet50(), nil
	case "uniform":
		if params < 1 || tensors < 1 {
			return nil, fmt.Errorf("-params %d and -tensors %d must be positive", params, tensors)
		}
		return uniform(params, tensors), nil
	}
	return nil, fmt.Errorf("unknown model %q (want resnet50 or uniform)", name)
}

func totalSize(ts []tensorSpec) int {
	n := 0
	for _, t := range ts {
		n += t.size
	}
	return n
}
