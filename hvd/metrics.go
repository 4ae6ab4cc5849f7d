package hvd

import (
	"context"
	"maps"
	"slices"

	"github.com/gorovod/gorovod/kernels"
)

// AverageMetric returns the mean of value (a loss or an accuracy measured
// on each rank's shard) over all ranks of rt (nil: the default runtime),
// like Horovod's MetricAverageCallback. Every rank must call it with the
// same name.
func AverageMetric(ctx context.Context, rt *Runtime, name string, value float64) (float64, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return 0, err
	}
	buf := []float64{value}
	if err := rt.Allreduce(ctx, NewTensor("metric/"+name, buf), kernels.Average, ReduceOptions{}); err != nil {
		return 0, err
	}
	return buf[0], nil
}

// AverageMetrics averages every metric of m over all ranks of rt (nil: the
// default runtime) in one all-reduce and returns the averages. Every rank
// must pass the same names.
func AverageMetrics(ctx context.Context, rt *Runtime, m map[string]float64) (map[string]float64, error) {
	rt, err := orDefault(rt)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(m))
	buf := make([]float64, len(names))
	key := "metrics"
	for i, n := range names {
		buf[i] = m[n]
		key += "/" + n
	}
	if err := rt.Allreduce(ctx, NewTensor(key, buf), kernels.Average, ReduceOptions{}); err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(names))
	for i, n := range names {
		out[n] = buf[i]
	}
	return out, nil
}
