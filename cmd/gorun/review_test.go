package main

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner"
)

// clearKnobEnv unsets every knob variable for the test, so that the
// environment gorun's tests run in cannot leak into them.
func clearKnobEnv(t *testing.T) {
	t.Helper()
	for _, name := range runner.KnobVars() {
		t.Setenv(name, "")
	}
}

// TestKnobsFromUserEnvironment: the GOROVOD_ variables in gorun's own
// environment set the knobs whose flags are not given; a flag wins over its
// variable.
func TestKnobsFromUserEnvironment(t *testing.T) {
	clearKnobEnv(t)
	for name, value := range map[string]string{
		jobenv.EnvStartTimeout: "45s", jobenv.EnvFusionThreshold: "1048576", jobenv.EnvCycleTime: "2ms",
		jobenv.EnvCacheCapacity: "7", jobenv.EnvStallCheckTime: "10s", jobenv.EnvStallShutdownTime: "20s",
		jobenv.EnvTimeline: "/tmp/tl.json", jobenv.EnvLogLevel: "debug", jobenv.EnvOpTimeout: "1m",
		jobenv.EnvNoSharedMemory: "1", jobenv.EnvTLS: "1",
	} {
		t.Setenv(name, value)
	}
	cfg, err := parse(t, "-np", "2", "./train")
	if err != nil {
		t.Fatal(err)
	}
	want := runner.DefaultConfig()
	want.NP, want.StartTimeout, want.FusionThreshold, want.CycleTime = 2, 45*time.Second, 1<<20, 2*time.Millisecond
	want.CacheCapacity, want.StallWarning, want.StallShutdown = 7, 10*time.Second, 20*time.Second
	want.TimelinePath, want.LogLevel, want.OpTimeout = "/tmp/tl.json", "debug", time.Minute
	if !equalConfig(cfg, want) || !cfg.NoSharedMemory || !cfg.TLS {
		t.Errorf("from the environment:\n%s (no shared memory %v, tls %v)\nwant\n%s (true, true)", fmtConfig(cfg), cfg.NoSharedMemory, cfg.TLS, fmtConfig(want))
	}

	cfg, err = parse(t, "-np", "2", "--start-timeout", "5s", "--fusion-threshold-mb", "2", "--cycle-time-ms", "3",
		"--cache-capacity", "9", "--stall-check-time", "40s", "--stall-shutdown-time", "50s",
		"--timeline-filename", "/t2", "--log-level", "warn", "--op-timeout", "2s", "--no-shared-memory=false", "--tls=false", "./train")
	if err != nil {
		t.Fatal(err)
	}
	want.StartTimeout, want.FusionThreshold, want.CycleTime = 5*time.Second, 2<<20, 3*time.Millisecond
	want.CacheCapacity, want.StallWarning, want.StallShutdown = 9, 40*time.Second, 50*time.Second
	want.TimelinePath, want.LogLevel, want.OpTimeout = "/t2", "warn", 2*time.Second
	if !equalConfig(cfg, want) || cfg.NoSharedMemory || cfg.TLS {
		t.Errorf("flags over the environment:\n%s (no shared memory %v, tls %v)\nwant\n%s (false, false)", fmtConfig(cfg), cfg.NoSharedMemory, cfg.TLS, fmtConfig(want))
	}
}

// TestBadKnobInUserEnvironment: a bad value in gorun's environment is a
// command-line error (exit 2) naming the variable, unless its flag is
// given.
func TestBadKnobInUserEnvironment(t *testing.T) {
	clearKnobEnv(t)
	for _, tt := range []struct{ name, value, flag, flagValue string }{
		{jobenv.EnvLogLevel, "loud", "--log-level", "debug"},
		{jobenv.EnvCycleTime, "fast", "--cycle-time-ms", "2"},
		{jobenv.EnvCacheCapacity, "-3", "--cache-capacity", "3"},
		{jobenv.EnvNoSharedMemory, "off", "--no-shared-memory", "true"},
		{jobenv.EnvStartTimeout, "0s", "--start-timeout", "10s"},
	} {
		t.Setenv(tt.name, tt.value)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"gorun", "-np", "1", "./train"}, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), "gorun: bad worker environment: "+tt.name+"=") ||
			!strings.Contains(stderr.String(), tt.name+" comes from gorun's environment") {
			t.Errorf("%s=%s: exit %d, stderr:\n%s", tt.name, tt.value, code, stderr.String())
		}
		if _, err := parse(t, "-np", "1", tt.flag+"="+tt.flagValue, "./train"); err != nil {
			t.Errorf("%s=%s with %s: %v", tt.name, tt.value, tt.flag, err)
		}
		t.Setenv(tt.name, "")
	}
}

// TestKnobFlagsHelp: every knob variable has a flag, and --help names the
// variable on that flag's line and states the precedence.
func TestKnobFlagsHelp(t *testing.T) {
	flagOf := knobFlags()
	if got, want := slices.Sorted(maps.Keys(flagOf)), slices.Sorted(slices.Values(runner.KnobVars())); !slices.Equal(got, want) {
		t.Fatalf("knobFlags covers %v, want %v", got, want)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"gorun", "--help"}, &out, &out); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := out.String()
	for name, flag := range flagOf {
		found := false
		for line := range strings.Lines(help) {
			found = found || strings.Contains(line, "--"+flag+" ") && strings.Contains(line, "[$"+name)
		}
		if !found {
			t.Errorf("--help has no line for --%s naming $%s", flag, name)
		}
	}
	if !strings.Contains(help, "command\n   line, then config file, then environment, then default") {
		t.Errorf("--help does not state the precedence:\n%s", help)
	}
}

// TestHostErrors: -np beyond one host's slots without -H speaks of -np,
// and two names of this machine in -H are refused; both before anything
// starts, with exit status 2.
func TestHostErrors(t *testing.T) {
	clearKnobEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--launcher", "local", "-np", "100000", "./train"}, "gorun: not enough slots: -np 100000 exceeds the 65536 ranks one host can run"},
		{[]string{"-H", "localhost:1,127.0.0.1:1", "./train"},
			`gorun: bad -H host list: "localhost" and "127.0.0.1" both name this machine; list it once with all its slots (localhost:2)`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"gorun"}, tt.args...), &stdout, &stderr)
		if code != exitUsage || !strings.HasPrefix(stderr.String(), tt.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}
