package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gorovod/gorovod/jobenv"
)

// KnobVars returns the GOROVOD_ variables through which a Config's start
// timeout and tuning knobs reach the ranks (see jobenv.Env): every variable
// that KnobsFromEnviron reads.
func KnobVars() []string {
	return []string{jobenv.EnvStartTimeout, jobenv.EnvFusionThreshold, jobenv.EnvCycleTime, jobenv.EnvCacheCapacity,
		jobenv.EnvStallCheckTime, jobenv.EnvStallShutdownTime, jobenv.EnvTimeline, jobenv.EnvLogLevel, jobenv.EnvOpTimeout, jobenv.EnvNoSharedMemory,
		jobenv.EnvHierarchical, jobenv.EnvAutotune, jobenv.EnvAutotuneLog, jobenv.EnvTLS}
}

// KnobsFromEnviron gives the knobs of c that were not set explicitly the
// values of their variables in the launcher's own environment, so that
// "GOROVOD_LOG_LEVEL=debug gorun ..." reaches the ranks: for each of
// KnobVars that given does not report (gorun: its flag is not on the
// command line) and that getenv returns non-empty, the knob takes that
// value. The precedence is thus flag, then environment, then default.
//
// Values are read as the ranks read them (FromEnviron: Go durations,
// decimal integers, GOROVOD_FUSION_THRESHOLD in bytes,
// GOROVOD_NO_SHARED_MEMORY 1 or 0) and checked together with the knobs
// already in c. A bad value is an error wrapping jobenv.ErrEnv that names the
// variable and its value, and c is then left unchanged. When the knobs already in c are broken by
// themselves, it leaves c unchanged and returns nil: Validate reports them.
// given may be nil (nothing set explicitly).
func (c *Config) KnobsFromEnviron(getenv func(string) string, given func(name string) bool) error {
	own := c.jobEnv()
	if own.Validate() != nil {
		return nil
	}
	vars := knobEnviron(own)
	var taken []string
	for _, name := range KnobVars() {
		if given != nil && given(name) {
			continue
		}
		if s := getenv(name); s != "" {
			vars[name], taken = s, append(taken, name)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	env, _, err := jobenv.FromEnviron(func(name string) string { return vars[name] })
	if err != nil {
		return errors.Join(err, fromEnvironHint(err, taken))
	}
	c.Knobs = env.Knobs
	return nil
}

// fromEnvironHint explains that the variables of taken that err names (all
// of taken if it names none) came from the launcher's environment.
func fromEnvironHint(err error, taken []string) error {
	var named []string
	for _, name := range taken {
		if strings.Contains(err.Error(), name) {
			named = append(named, name)
		}
	}
	if len(named) == 0 {
		named = taken
	}
	if len(named) == 1 {
		return fmt.Errorf("%w: %s comes from gorun's environment, as no flag sets it; fix or unset it, or give the flag",
			jobenv.ErrEnv, named[0])
	}
	return fmt.Errorf("%w: %s and %s come from gorun's environment, as no flag sets them; fix or unset them, or give the flags",
		jobenv.ErrEnv, strings.Join(named[:len(named)-1], ", "), named[len(named)-1])
}

// knobEnviron returns the KnobVars of e, by name, as Environ writes them.
func knobEnviron(e jobenv.Env) map[string]string {
	knobs := KnobVars()
	vars := make(map[string]string, len(knobs))
	for _, kv := range e.Environ() {
		if name, value, _ := strings.Cut(kv, "="); slices.Contains(knobs, name) {
			vars[name] = value
		}
	}
	return vars
}
