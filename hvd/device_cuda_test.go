//go:build cuda

package hvd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
	"github.com/gorovod/gorovod/kernels/cuda"
)

// gpu opens the GPU the test ranks share, for filling and reading tensors.
func gpu(t testing.TB) (*cuda.Context, *cuda.Stream) {
	t.Helper()
	ctx, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ctx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); ctx.Close() })
	return ctx, st
}

// upload allocates a device tensor on rt holding values (as dt).
func upload(t testing.TB, rt *hvd.Runtime, st *cuda.Stream, name string, dt kernels.DType, values []float64, shape ...int) *hvd.DeviceTensor {
	t.Helper()
	if len(shape) == 0 {
		shape = []int{len(values)}
	}
	d, err := rt.AllocDevice(name, dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.FreeDevice(d) })
	if len(values) > 0 {
		host := make([]byte, len(values)*dt.Size())
		encode(dt, host, values)
		if err := st.CopyHtoD(d.Ptr, host); err != nil {
			t.Fatal(err)
		}
		if err := st.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// download reads a device tensor back as float64s.
func download(t testing.TB, st *cuda.Stream, d *hvd.DeviceTensor) []float64 {
	t.Helper()
	host := make([]byte, d.Bytes())
	if len(host) > 0 {
		if err := st.CopyDtoH(host, d.Ptr); err != nil {
			t.Fatal(err)
		}
		if err := st.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]float64, d.Count())
	decode(d.DType, out, host)
	return out
}

// input is rank r's element j: small integers, exact in every dtype, so
// that sums, averages and maxima over up to 4 ranks are exact too.
func input(r, j int) float64 { return float64(r+1) + float64(j%7) }

func expect(op kernels.Op, n, j int) float64 {
	k := float64(j % 7)
	switch op {
	case kernels.Sum:
		return float64(n*(n+1)/2) + float64(n)*k
	case kernels.Average:
		return float64(n+1)/2 + k
	case kernels.Max:
		return float64(n) + k
	case kernels.Min:
		return 1 + k
	}
	panic(op)
}

// TestDeviceAllreduce all-reduces device tensors on 2 and 4 ranks sharing
// one GPU, over sizes that take zero, one and several staging spans.
func TestDeviceAllreduce(t *testing.T) {
	_, st := gpu(t)
	for _, n := range []int{2, 4} {
		rts := hvdtest.Start(t, n)
		for _, dt := range []kernels.DType{kernels.F32, kernels.F64, kernels.F16, kernels.BF16, kernels.I32, kernels.I64} {
			for _, op := range []kernels.Op{kernels.Sum, kernels.Average, kernels.Max, kernels.Min} {
				counts := []int{0, 1, 1000}
				if op == kernels.Sum {
					counts = append(counts, (40<<20)/dt.Size()+3) // three spans, the last one short
				}
				for _, count := range counts {
					name := fmt.Sprintf("n%d/%v/%v/%d", n, dt, op, count)
					ds := make([]*hvd.DeviceTensor, n)
					for r, rt := range rts {
						vals := make([]float64, count)
						for j := range vals {
							vals[j] = input(r, j)
						}
						ds[r] = upload(t, rt, st, name, dt, vals)
					}
					each(t, rts, func(r int, rt *hvd.Runtime) error {
						return rt.AllreduceDevice(context.Background(), ds[r], op, hvd.ReduceOptions{})
					})
					for r := range rts {
						got := download(t, st, ds[r])
						for j, v := range got {
							want := expect(op, n, j)
							if !dt.IsFloat() {
								want = math.RoundToEven(want) // integer averages round half to even
							}
							if v != want {
								t.Fatalf("%s: rank %d element %d = %v, want %v", name, r, j, v, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestDeviceAllreduceScales: a prescale and a postscale are applied on the
// GPU (2 × ... × 0.25 of a sum over 2 ranks is half the sum).
func TestDeviceAllreduceScales(t *testing.T) {
	_, st := gpu(t)
	rts := hvdtest.Start(t, 2)
	const count = (20 << 20) / 4
	ds := make([]*hvd.DeviceTensor, 2)
	for r, rt := range rts {
		vals := make([]float64, count)
		for j := range vals {
			vals[j] = input(r, j)
		}
		ds[r] = upload(t, rt, st, "scaled", kernels.F32, vals)
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		return rt.AllreduceDevice(context.Background(), ds[r], kernels.Sum, hvd.ReduceOptions{Prescale: 2, Postscale: 0.25})
	})
	for r := range rts {
		for j, v := range download(t, st, ds[r]) {
			if want := expect(kernels.Sum, 2, j) / 2; v != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, j, v, want)
			}
		}
	}
}

// TestDeviceBroadcast copies root 1's tensor (several spans) to every rank.
func TestDeviceBroadcast(t *testing.T) {
	_, st := gpu(t)
	rts := hvdtest.Start(t, 4)
	const count = (36 << 20) / 8
	ds := make([]*hvd.DeviceTensor, 4)
	for r, rt := range rts {
		vals := make([]float64, count)
		for j := range vals {
			vals[j] = float64(r*1000 + j%1000)
		}
		ds[r] = upload(t, rt, st, "bcast", kernels.F64, vals)
	}
	each(t, rts, func(r int, rt *hvd.Runtime) error {
		return rt.BroadcastDevice(context.Background(), ds[r], 1)
	})
	for r := range rts {
		for j, v := range download(t, st, ds[r]) {
			if want := float64(1000 + j%1000); v != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, j, v, want)
			}
		}
	}
}

// TestDeviceAllgather gathers rank r's r+1 rows of 3 into a new device
// tensor on every rank.
func TestDeviceAllgather(t *testing.T) {
	_, st := gpu(t)
	rts := hvdtest.Start(t, 3)
	ds := make([]*hvd.DeviceTensor, 3)
	for r, rt := range rts {
		vals := make([]float64, 3*(r+1))
		for j := range vals {
			vals[j] = float64(10*r + j)
		}
		ds[r] = upload(t, rt, st, "rows", kernels.I32, vals, r+1, 3)
	}
	outs := make([]*hvd.DeviceTensor, 3)
	each(t, rts, func(r int, rt *hvd.Runtime) (err error) {
		outs[r], err = rt.AllgatherDevice(context.Background(), ds[r])
		return err
	})
	var want []float64
	for r := range 3 {
		for j := range 3 * (r + 1) {
			want = append(want, float64(10*r+j))
		}
	}
	for r, rt := range rts {
		if fmt.Sprint(outs[r].Shape) != "[6 3]" {
			t.Fatalf("rank %d: shape %v, want [6 3]", r, outs[r].Shape)
		}
		if got := download(t, st, outs[r]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("rank %d: got %v, want %v", r, got, want)
		}
		if err := rt.FreeDevice(outs[r]); err != nil {
			t.Fatalf("rank %d: FreeDevice: %v", r, err)
		}
	}
}

// TestDeviceAfterShutdown: device operations after Shutdown fail with
// ErrShutdown, and memory the runtime did not allocate is not freed.
func TestDeviceAfterShutdown(t *testing.T) {
	_, st := gpu(t)
	rt := hvdtest.Start(t, 1)[0]
	d := upload(t, rt, st, "late", kernels.F32, []float64{1, 2})
	if err := rt.FreeDevice(&hvd.DeviceTensor{Name: "alien", DType: kernels.F32, Shape: []int{1}, Ptr: d.Ptr + 4}); !errors.Is(err, hvd.ErrInvalidTensor) {
		t.Errorf("freeing a foreign pointer: err = %v, want ErrInvalidTensor", err)
	}
	rt.Shutdown()
	if err := rt.AllreduceDevice(context.Background(), d, kernels.Sum, hvd.ReduceOptions{}); !errors.Is(err, hvd.ErrShutdown) {
		t.Errorf("after Shutdown: err = %v, want ErrShutdown", err)
	}
}

// TestDeviceFailureReachesEveryRank: a copy that fails on one rank (its
// pointer maps no device memory) fails the all-reduce on every rank within
// seconds, instead of leaving the others waiting for its spans.
func TestDeviceFailureReachesEveryRank(t *testing.T) {
	_, st := gpu(t)
	rts := hvdtest.Start(t, 3)
	const count = (20 << 20) / 4
	ds := make([]*hvd.DeviceTensor, 3)
	for r, rt := range rts {
		ds[r] = upload(t, rt, st, "doomed", kernels.F32, make([]float64, count))
	}
	ds[1] = &hvd.DeviceTensor{Name: "doomed", DType: kernels.F32, Shape: []int{count}, Ptr: 8 << 40}
	errs := make([]error, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for r, rt := range rts {
			wg.Go(func() { errs[r] = rt.AllreduceDevice(context.Background(), ds[r], kernels.Sum, hvd.ReduceOptions{}) })
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ranks still waiting 10 s after rank 1's copy failed")
	}
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: no error", r)
		}
	}
	if !strings.Contains(fmt.Sprint(errs[1]), "staging") {
		t.Errorf("rank 1: err = %v, want the failed staging", errs[1])
	}
}

// BenchmarkDeviceVsHost all-reduces 64 MiB of float32 on 2 and 4 ranks
// (sharing one GPU) over loopback TCP, alternating one all-reduce from host
// memory and one from GPU memory, so that both see the same machine, and
// reports each one's bus bandwidth (2(n-1)/n × bytes / time) and their
// ratio, for several staging span sizes.
//
//	go test -tags cuda -run '^$' -bench DeviceVsHost ./hvd
func BenchmarkDeviceVsHost(b *testing.B) {
	const bytes = 64 << 20
	_, st := gpu(b)
	for _, n := range []int{2, 4} {
		rts := hvdtest.Start(b, n, hvdtest.OverTCP())
		hosts := make([]*hvd.Tensor, n)
		devs := make([]*hvd.DeviceTensor, n)
		for r, rt := range rts {
			hosts[r] = hvd.NewTensor(fmt.Sprintf("host%d", n), make([]float32, bytes/4))
			devs[r] = upload(b, rt, st, fmt.Sprintf("dev%d", n), kernels.F32, make([]float64, bytes/4))
		}
		timed := func(b *testing.B, f func(r int, rt *hvd.Runtime) error) time.Duration {
			start := time.Now()
			each(b, rts, f)
			return time.Since(start)
		}
		for _, chunk := range []int{4 << 20, 8 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("n=%d/span=%dMiB", n, chunk>>20), func(b *testing.B) {
				for _, rt := range rts {
					rt.SetStageChunk(chunk)
				}
				var host, dev time.Duration
				for b.Loop() {
					host += timed(b, func(r int, rt *hvd.Runtime) error {
						return rt.Allreduce(context.Background(), hosts[r], kernels.Sum, hvd.ReduceOptions{})
					})
					dev += timed(b, func(r int, rt *hvd.Runtime) error {
						return rt.AllreduceDevice(context.Background(), devs[r], kernels.Sum, hvd.ReduceOptions{})
					})
				}
				busbw := func(d time.Duration) float64 {
					return bytes * 2 * float64(n-1) / float64(n) / (d.Seconds() / float64(b.N)) / 1e9
				}
				b.ReportMetric(busbw(host), "host-busbw-GB/s")
				b.ReportMetric(busbw(dev), "device-busbw-GB/s")
				b.ReportMetric(busbw(dev)/busbw(host), "device/host")
			})
		}
	}
}

// encode writes values into b as dt elements.
func encode(dt kernels.DType, b []byte, values []float64) {
	for i, v := range values {
		switch dt {
		case kernels.F32:
			kernels.FromBytes[float32](b)[i] = float32(v)
		case kernels.F64:
			kernels.FromBytes[float64](b)[i] = v
		case kernels.F16:
			kernels.FromBytes[kernels.Float16](b)[i] = kernels.ToFloat16(float32(v))
		case kernels.BF16:
			kernels.FromBytes[kernels.BFloat16](b)[i] = kernels.ToBFloat16(float32(v))
		case kernels.I32:
			kernels.FromBytes[int32](b)[i] = int32(v)
		case kernels.I64:
			kernels.FromBytes[int64](b)[i] = int64(v)
		case kernels.U8:
			b[i] = uint8(v)
		}
	}
}

// decode reads the dt elements of b into out.
func decode(dt kernels.DType, out []float64, b []byte) {
	for i := range out {
		switch dt {
		case kernels.F32:
			out[i] = float64(kernels.FromBytes[float32](b)[i])
		case kernels.F64:
			out[i] = kernels.FromBytes[float64](b)[i]
		case kernels.F16:
			out[i] = float64(kernels.FromBytes[kernels.Float16](b)[i].Float32())
		case kernels.BF16:
			out[i] = float64(kernels.FromBytes[kernels.BFloat16](b)[i].Float32())
		case kernels.I32:
			out[i] = float64(kernels.FromBytes[int32](b)[i])
		case kernels.I64:
			out[i] = float64(kernels.FromBytes[int64](b)[i])
		case kernels.U8:
			out[i] = float64(b[i])
		}
	}
}
