// Package cuda runs gorovod's reductions on an NVIDIA GPU: device memory,
// page-locked host buffers, streams, events and the element-wise kernels
// (reduce, scale, convert) that the collective layer applies to gradients
// held on the device.
//
// Everything except this documentation is behind the build tag cuda, so the
// default build neither needs the CUDA toolkit nor links
// gorgonia.org/cu, whose package initialiser ends the process on a machine
// without a GPU. Build with -tags cuda (and cgo) on a machine with the CUDA
// driver; the tests and benchmarks of this package can only run there.
//
// # Contexts and threads
//
// A Context stands for one GPU. It retains the device's primary CUDA context,
// so several Contexts on the same GPU in one process (in-process test ranks,
// for example) share it. CUDA makes a context current per OS thread and Go
// moves goroutines between threads, so every method that calls the driver
// locks its goroutine to its thread, makes the context current, does its work
// and unlocks. All methods may be called from any goroutine.
//
// # Kernels
//
// Reduce, Scale and Convert enqueue kernels on a Stream and return at once.
// Their results equal those of the CPU functions kernels.Reduce,
// kernels.Scale and the kernels bulk converters bit for bit, with one
// exception: when an arithmetic result (a sum, a product or a scaled value)
// is a NaN, its payload may differ, because x86 propagates an operand's NaN
// payload and NVIDIA GPUs return a canonical NaN. Half-precision types are
// widened to float32, combined, and narrowed with round-to-nearest-even by
// the same bit manipulations the CPU uses; kernels.Average reduces as
// kernels.Sum, as on the CPU (scale afterwards).
//
// The kernels are written in CUDA C++ (kernels.cu), compiled to PTX by
// go generate (nvcc -ptx -arch=compute_80) and embedded; the driver compiles
// the PTX for the GPU at hand when a Context is opened. They walk memory with
// grid-stride loops over 16-byte vectors, with scalar accesses for the
// elements before the first 16-byte boundary, after the last whole vector,
// and for operands whose addresses differ modulo 16.
package cuda

// The PTX is committed; regenerate it after editing kernels.cu (needs nvcc,
// CUDA 11.8 or later). The directive lives here, in the one file without the
// cuda build tag, so that a plain go generate finds it.
//go:generate nvcc -ptx -arch=compute_80 -O3 -o kernels.ptx kernels.cu
