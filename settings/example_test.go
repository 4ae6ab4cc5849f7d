package settings_test

import (
	"fmt"

	"github.com/gorovod/gorovod/settings"
)

// Start from the defaults and change the knobs a job needs; the promoted
// engine fields read as the knobs' own.
func ExampleDefaults() {
	k := settings.Defaults()
	k.FusionThreshold = 16 << 20
	k.NoSharedMemory = true
	fmt.Println(k.FusionThreshold>>20, "MiB,", k.CycleTime, "cycles, log level", k.LogLevel, "no shared memory:", k.NoSharedMemory)
	// Output: 16 MiB, 1ms cycles, log level info no shared memory: true
}
