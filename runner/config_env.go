package runner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// KnobVars returns the GOROVOD_ variables through which a Config's start
// timeout and tuning knobs reach the ranks (see jobenv.Env): every variable
// that KnobsFromEnviron reads.
func KnobVars() []string {
	var names []string
	for _, k := range settings.Table() {
		names = append(names, k.Var)
	}
	return names
}

// KnobsFromEnviron gives the knobs of c that were not set explicitly the
// values of their variables in the launcher's own environment, so that
// "GOROVOD_LOG_LEVEL=debug gorun ..." reaches the ranks: for each of
// KnobVars that given does not report (gorun: its flag is not on the
// command line) and that getenv returns non-empty, the knob takes that
// value. The precedence is thus flag, then environment, then default.
//
// Values are read as the ranks read them (jobenv.Env.Set: Go durations,
// decimal integers, GOROVOD_FUSION_THRESHOLD in bytes,
// GOROVOD_NO_SHARED_MEMORY 1 or 0) and checked together with the knobs
// already in c. A bad value is an error wrapping jobenv.ErrEnv that names
// the variable and its value, and c is then left unchanged. When the knobs
// already in c are broken by themselves, it leaves c unchanged and returns
// nil: Validate reports them.
// given may be nil (nothing set explicitly).
func (c *Config) KnobsFromEnviron(getenv func(string) string, given func(name string) bool) error {
	env := c.jobEnv()
	if env.Validate() != nil {
		return nil
	}
	var taken []string
	var errs []error
	for _, name := range KnobVars() {
		if given != nil && given(name) {
			continue
		}
		if s := getenv(name); s != "" {
			taken = append(taken, name)
			errs = append(errs, env.Set(name, s))
		}
	}
	if len(taken) == 0 {
		return nil
	}
	err := errors.Join(errs...)
	if err == nil {
		err = env.Validate()
	}
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
