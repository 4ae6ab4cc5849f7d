package hvd

import "fmt"

// Device is the processor a rank computes on.
type Device struct {
	// GPU is the CUDA device ordinal this rank pins, or -1 for the CPU.
	GPU int
}

// IsGPU reports whether the device is a GPU.
func (d Device) IsGPU() bool { return d.GPU >= 0 }

func (d Device) String() string {
	if d.IsGPU() {
		return fmt.Sprintf("cuda:%d", d.GPU)
	}
	return "cpu"
}

// CurrentDevice is the default runtime's Device, or the CPU before Init.
func CurrentDevice() Device {
	if rt := Default(); rt != nil {
		return rt.Device()
	}
	return Device{GPU: -1}
}

// pinGPU is the GPU a rank with localRank pins among count visible GPUs:
// local ranks take GPUs in order, so the ranks of a host get distinct GPUs
// while there are enough, and share them round-robin beyond that. -1 (the
// CPU) when there is none.
func pinGPU(localRank, count int) int {
	if count <= 0 {
		return -1
	}
	return localRank % count
}
