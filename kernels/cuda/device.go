//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"
)

// DriverVersion returns the newest CUDA version that the installed driver
// supports (cuDriverGetVersion), as major and minor: 12 and 4 for a
// driver of CUDA 12.4. It is not the driver's own release number (such as
// 550.54), which the CUDA driver API does not report. A failed call gives
// an error wrapping ErrDriver.
func DriverVersion() (major, minor int, err error) {
	v := cu.Version() // 1000*major + 10*minor, or -1 when the call failed
	if v < 0 {
		return 0, 0, fmt.Errorf("%w: cuDriverGetVersion", ErrDriver)
	}
	return v / 1000, v % 1000 / 10, nil
}

// DeviceName returns the name that the driver reports for GPU ordinal
// (0-based, among the visible devices), such as "NVIDIA H100 80GB HBM3",
// without opening a context on it. An ordinal out of range gives an error
// wrapping ErrNoDevice.
func DeviceName(ordinal int) (string, error) {
	n, err := DeviceCount()
	if err != nil {
		return "", err
	}
	if ordinal < 0 || ordinal >= n {
		return "", fmt.Errorf("%w: ordinal %d, %d visible", ErrNoDevice, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return "", driverErr("cuDeviceGet", err)
	}
	name, err := dev.Name()
	if err != nil {
		return "", driverErr("cuDeviceGetName", err)
	}
	return name, nil
}
