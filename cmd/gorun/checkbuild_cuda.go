//go:build cuda

package main

import (
	"fmt"
	"os"

	"github.com/gorovod/gorovod/kernels/cuda"
)

// cudaFeatures reports CUDA for gorun --check-build in a build with the
// cuda tag: the CUDA version the driver supports and every visible GPU by
// name. (Such a build cannot start at all on a machine whose CUDA driver
// fails to initialise: gorgonia.org/cu ends the process first; see package
// kernels/cuda.)
func cudaFeatures() []feature {
	major, minor, err := cuda.DriverVersion()
	if err != nil {
		return []feature{{name: "CUDA", note: "in this build, but " + err.Error()}}
	}
	fs := []feature{{ok: true, name: "CUDA", note: fmt.Sprintf("driver supports CUDA %d.%d", major, minor)}}
	n, err := cuda.DeviceCount()
	switch {
	case err != nil:
		return append(fs, feature{name: "GPUs", note: err.Error()})
	case n == 0:
		note := "none visible"
		if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
			note += "; CUDA_VISIBLE_DEVICES=" + v
		}
		return append(fs, feature{name: "GPUs", note: note})
	}
	for i := range n {
		name, err := cuda.DeviceName(i)
		if err != nil {
			fs = append(fs, feature{name: fmt.Sprintf("GPU %d", i), note: err.Error()})
			continue
		}
		fs = append(fs, feature{ok: true, name: fmt.Sprintf("GPU %d", i), note: name})
	}
	return fs
}
