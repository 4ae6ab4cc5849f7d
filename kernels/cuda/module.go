//go:build cuda

package cuda

import (
	_ "embed" // for the PTX below
	"fmt"
	"unsafe"

	"github.com/gorovod/gorovod/kernels"
	"gorgonia.org/cu"
)

// ptx is the kernels' PTX, made from kernels.cu by go generate (the
// directive is in doc.go, which every build sees). The driver
// compiles it for the device when the module is loaded.
//
//go:embed kernels.ptx
var ptx string

// threadsPerBlock is the block size of every launch.
const threadsPerBlock = 256

// Conversions that have a kernel, in the order of convertKernels.
var conversions = [...]struct{ from, to kernels.DType }{
	{kernels.F32, kernels.F16},
	{kernels.F16, kernels.F32},
	{kernels.F32, kernels.BF16},
	{kernels.BF16, kernels.F32},
}

// dtypeNames are the dtype parts of the kernel names in kernels.cu.
var dtypeNames = [...]string{
	kernels.F32: "f32", kernels.F64: "f64", kernels.F16: "f16", kernels.BF16: "bf16",
	kernels.I32: "i32", kernels.I64: "i64", kernels.U8: "u8",
}

// kernel is one entry point of the module and the size of the grid that
// fills the device with it.
type kernel struct {
	fn        cu.Function
	maxBlocks int // resident blocks on the whole device at full occupancy
}

// module is the loaded kernels.ptx of one Context. It is read-only after
// loadModule.
type module struct {
	mod     cu.Module
	reduce  [kernels.U8 + 1][kernels.Prod + 1]kernel // by DType, then Op
	scale   [kernels.U8 + 1]kernel                   // by DType
	convert [len(conversions)]kernel
}

// loadModule loads the PTX into the current context and looks up every
// kernel. The caller holds the OS thread with the context current.
func loadModule(dev cu.Device) (*module, error) {
	sms, err := dev.Attribute(cu.MultiprocessorCount)
	if err != nil {
		return nil, driverErr("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", err)
	}
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return nil, driverErr("cuModuleLoadData(kernels.ptx)", err)
	}
	m := &module{mod: mod}
	get := func(name string) (kernel, error) {
		fn, err := mod.Function(name)
		if err != nil {
			return kernel{}, driverErr("cuModuleGetFunction("+name+")", err)
		}
		perSM, err := fn.MaxActiveBlocksPerMultiProcessor(threadsPerBlock, 0)
		if err != nil || perSM < 1 {
			perSM = 2048 / threadsPerBlock // full occupancy on every GPU since Volta
		}
		return kernel{fn: fn, maxBlocks: perSM * sms}, nil
	}
	for _, dt := range kernels.DTypes {
		for _, op := range []kernels.Op{kernels.Sum, kernels.Min, kernels.Max, kernels.Prod} {
			if m.reduce[dt][op], err = get(fmt.Sprintf("reduce_%s_%s", dtypeNames[dt], op)); err != nil {
				_ = mod.Unload()
				return nil, err
			}
		}
		if m.scale[dt], err = get("scale_" + dtypeNames[dt]); err != nil {
			_ = mod.Unload()
			return nil, err
		}
	}
	for i, cv := range conversions {
		if m.convert[i], err = get(dtypeNames[cv.from] + "_to_" + dtypeNames[cv.to]); err != nil {
			_ = mod.Unload()
			return nil, err
		}
	}
	return m, nil
}

// unload unloads the module; the caller holds the context current.
func (m *module) unload() error { return m.mod.Unload() }

// launch enqueues k on s over n elements of size elemSize. Each thread of
// the grid handles one 16-byte vector per grid-stride step, so the grid is
// the smaller of what covers the buffer once and what fills the device.
// Every scalar in params must point to an 8-byte value. The caller holds the
// context current.
func (k kernel) launch(s cu.Stream, n, elemSize int, params ...unsafe.Pointer) error {
	vectors := (n*elemSize + 15) / 16
	blocks := min(k.maxBlocks, (vectors+threadsPerBlock-1)/threadsPerBlock)
	blocks = max(blocks, 1)
	if err := k.fn.Launch(blocks, 1, 1, threadsPerBlock, 1, 1, 0, s, params); err != nil {
		return driverErr("cuLaunchKernel", err)
	}
	return nil
}
