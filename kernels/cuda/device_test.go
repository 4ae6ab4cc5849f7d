//go:build cuda

package cuda

import (
	"errors"
	"testing"
)

// TestDriverVersion: the driver supports at least CUDA 11.8, which the
// kernels' PTX (ISA 7.8, made by nvcc 11.8) needs, with a plausible minor
// version.
func TestDriverVersion(t *testing.T) {
	major, minor, err := DriverVersion()
	if err != nil {
		t.Fatal(err)
	}
	if major < 11 || major == 11 && minor < 8 || minor < 0 || minor > 9 {
		t.Errorf("DriverVersion() = %d.%d, want 11.8 or later", major, minor)
	}
}

// TestDeviceName: device 0 has the name its Context reports, and ordinals
// outside the visible devices are errors wrapping ErrNoDevice.
func TestDeviceName(t *testing.T) {
	name, err := DeviceName(0)
	if err != nil {
		t.Fatal(err)
	}
	if name == "" || name != gpu.Name() {
		t.Errorf("DeviceName(0) = %q, want %q (the Context's)", name, gpu.Name())
	}
	n, err := DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	for _, ordinal := range []int{-1, n} {
		if _, err := DeviceName(ordinal); !errors.Is(err, ErrNoDevice) {
			t.Errorf("DeviceName(%d) with %d devices: %v, want an error wrapping ErrNoDevice", ordinal, n, err)
		}
	}
}
