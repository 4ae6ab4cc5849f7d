package jobenv

import (
	"slices"
	"testing"

	"github.com/gorovod/gorovod/settings"
)

// TestKnobVarsFollowTable: the contract carries every knob of
// settings.Table after the identity, in its order, and the constants that
// name knob variables are the table's.
func TestKnobVarsFollowTable(t *testing.T) {
	var table []string
	for _, k := range settings.Table() {
		table = append(table, k.Var)
	}
	var contract []string
	for _, v := range envVars()[10:] {
		contract = append(contract, v.name)
	}
	if !slices.Equal(contract, table) {
		t.Errorf("contract's knob variables %v, table's %v", contract, table)
	}
	named := []string{EnvStartTimeout, EnvFusionThreshold, EnvCycleTime, EnvCacheCapacity, EnvStallCheckTime,
		EnvStallShutdownTime, EnvTimeline, EnvLogLevel, EnvOpTimeout, EnvNoSharedMemory, EnvHierarchical,
		EnvAutotune, EnvAutotuneLog, EnvTLS}
	for _, n := range named {
		if !slices.Contains(table, n) {
			t.Errorf("%s is not a variable of settings.Table", n)
		}
	}
	if envVars()[9].name != EnvBindAddr {
		t.Errorf("the identity does not end with %s", EnvBindAddr)
	}
}

// TestSet: Set reads one variable as FromEnviron does, and names it when
// it does not parse.
func TestSet(t *testing.T) {
	e := DefaultEnv()
	if err := e.Set(EnvCycleTime, "3ms"); err != nil || e.CycleTime.String() != "3ms" {
		t.Errorf("Set(%s, 3ms): %v, %v", EnvCycleTime, e.CycleTime, err)
	}
	if err := e.Set(EnvCycleTime, "fast"); err == nil || err.Error() != `jobenv: bad worker environment: GOROVOD_CYCLE_TIME="fast": not a Go duration such as "1ms", "60s" or "1m30s"` {
		t.Errorf("Set(%s, fast): %v", EnvCycleTime, err)
	}
	if err := e.Set("GOROVOD_NO_SUCH", "1"); err == nil {
		t.Error("Set of an unknown variable: no error")
	}
}
