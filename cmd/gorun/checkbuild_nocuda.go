//go:build !cuda

package main

// noCUDA is the note of the CUDA line of a build without the cuda tag.
const noCUDA = "not in this build: build with -tags cuda, cgo and the CUDA toolkit"

// cudaFeatures reports CUDA for gorun --check-build: a build without the
// cuda tag has none (and does not link package kernels/cuda).
func cudaFeatures() []feature {
	return []feature{{name: "CUDA", note: noCUDA}}
}
