package runner

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// jobOf is a valid config of np ranks on hosts ("" for none), with a bind
// address so that remote hosts are allowed.
func jobOf(t *testing.T, hosts string, np int) Config {
	t.Helper()
	c := DefaultConfig()
	c.NP, c.Command, c.BindAddr = np, []string{"./train"}, "127.0.0.1"
	if hosts != "" {
		hs, err := ParseHosts(hosts)
		if err != nil {
			t.Fatal(err)
		}
		c.Hosts = hs
	}
	return c
}

// TestValidateNPWithoutHosts: without hosts every rank runs on localhost;
// an -np that one host cannot take is an error about -np, not about a host
// list the user never gave.
func TestValidateNPWithoutHosts(t *testing.T) {
	if err := jobOf(t, "", MaxSlotsPerHost).Validate(); err != nil {
		t.Errorf("-np %d without hosts: %v", MaxSlotsPerHost, err)
	}
	err := jobOf(t, "", 100000).Validate()
	if !errors.Is(err, ErrSlots) || errors.Is(err, ErrHosts) ||
		!strings.Contains(err.Error(), "-np 100000 exceeds the 65536 ranks one host can run") ||
		!strings.Contains(err.Error(), "no -H or -hostfile") {
		t.Errorf("-np 100000 without hosts: %v", err)
	}
	if n := strings.Count(err.Error(), "\n"); n != 0 {
		t.Errorf("%d extra lines:\n%v", n, err)
	}
}

// TestValidateThisMachineOnce: the names of this machine (IsLocalHost) are
// one host, so listing two of them is an error that shows the merged item.
func TestValidateThisMachineOnce(t *testing.T) {
	for hosts, want := range map[string]string{
		"localhost:1,127.0.0.1:1":       `"localhost" and "127.0.0.1" both name this machine; list it once with all its slots (localhost:2)`,
		"127.0.0.1:2,node9:1,[::1]:3":   `"127.0.0.1" and "::1" both name this machine; list it once with all its slots (127.0.0.1:5)`,
		"LOCALHOST,127.0.0.1:2,[::1]:1": `"LOCALHOST", "127.0.0.1" and "::1" all name this machine; list it once with all its slots (LOCALHOST:4)`,
	} {
		err := jobOf(t, hosts, 2).Validate()
		if !errors.Is(err, ErrHosts) || !strings.Contains(err.Error(), want) {
			t.Errorf("-H %s: %v\nwant ErrHosts containing %s", hosts, err, want)
		}
	}
	if name, err := os.Hostname(); err == nil && !strings.EqualFold(name, "localhost") {
		if hs, err := ParseHosts("localhost:1," + name + ":1"); err == nil {
			c := jobOf(t, "", 2)
			c.Hosts = hs
			if err := c.Validate(); !errors.Is(err, ErrHosts) || !strings.Contains(err.Error(), "both name this machine") {
				t.Errorf("-H localhost:1,%s:1 (this machine's name): %v", name, err)
			}
		}
	}
	for _, hosts := range []string{"localhost:2", "127.0.0.2:2,localhost:2", "localhost:1,node9:1"} {
		if err := jobOf(t, hosts, 2).Validate(); err != nil {
			t.Errorf("-H %s: %v", hosts, err)
		}
	}
}

// TestGorunLogLevel: gorun's own logger follows LogLevel (debug shows its
// debug records, error hides its warnings), and Verbose shows its info
// records; by default it shows warnings only.
func TestGorunLogLevel(t *testing.T) {
	for _, tt := range []struct {
		level   string
		verbose bool
		want    string // the records that appear, by their first letter
	}{
		{"info", false, "WE"},
		{"warn", false, "WE"},
		{"info", true, "IWE"},
		{"debug", false, "DIWE"},
		{"DEBUG", true, "DIWE"},
		{"error", false, "E"},
		{"error", true, "IWE"},
	} {
		var buf strings.Builder
		c := Config{Knobs: settings.Knobs{LogLevel: tt.level}, Verbose: tt.verbose, Stderr: &buf}
		log := c.logger()
		log.Debug("D")
		log.Info("I")
		log.Warn("W")
		log.Error("E")
		got := ""
		for _, m := range []string{"D", "I", "W", "E"} {
			if strings.Contains(buf.String(), "msg="+m+"\n") {
				got += m
			}
		}
		if got != tt.want {
			t.Errorf("LogLevel %q, Verbose %v: records %q, want %q", tt.level, tt.verbose, got, tt.want)
		}
	}
}

// TestLaunchLogLevelDebug: a job launched with LogLevel debug (and no
// Logger) shows gorun's records below warn level on Stderr.
func TestLaunchLogLevelDebug(t *testing.T) {
	f := newFakeSpawner(t)
	f.exitNow[0], f.exitNow[1] = 0, 4
	var out testutil.SyncBuffer
	cfg := fakeConfig(t, f, "a:2", 2, &out)
	cfg.LogLevel = "debug"
	if err := await(t, launchAsync(t.Context(), cfg), 5*time.Second); err == nil {
		t.Fatal("Launch = nil, want rank 1's failure")
	}
	if !strings.Contains(out.String(), `level=INFO msg="gorun: stopping the job"`) {
		t.Errorf("stderr at log level debug lacks gorun's info records:\n%s", out.String())
	}
}

// TestKnobsFromEnviron: knobs not set explicitly take the variables of the
// launcher's environment, read as the ranks read them; explicit ones win.
func TestKnobsFromEnviron(t *testing.T) {
	env := map[string]string{
		jobenv.EnvStartTimeout: "45s", jobenv.EnvFusionThreshold: "1048576", jobenv.EnvCycleTime: "2ms", jobenv.EnvCacheCapacity: "7",
		jobenv.EnvStallCheckTime: "10s", jobenv.EnvStallShutdownTime: "20s", jobenv.EnvTimeline: "/tmp/tl.json",
		jobenv.EnvLogLevel: "debug", jobenv.EnvOpTimeout: "1m", jobenv.EnvNoSharedMemory: "1",
		jobenv.EnvHierarchical: "on", jobenv.EnvAutotune: "1", jobenv.EnvAutotuneLog: "/tmp/tune.csv", jobenv.EnvTLS: "1",
	}
	c := DefaultConfig()
	if err := c.KnobsFromEnviron(func(k string) string { return env[k] }, nil); err != nil {
		t.Fatal(err)
	}
	if c.StartTimeout != 45*time.Second || c.FusionThreshold != 1<<20 || c.CycleTime != 2*time.Millisecond ||
		c.CacheCapacity != 7 || c.StallWarning != 10*time.Second || c.StallShutdown != 20*time.Second ||
		c.TimelinePath != "/tmp/tl.json" || c.LogLevel != "debug" || c.OpTimeout != time.Minute || !c.NoSharedMemory ||
		c.Hierarchical != settings.On || !c.Autotune || c.AutotuneLogPath != "/tmp/tune.csv" || !c.TLS {
		t.Errorf("knobs from the environment: %+v", c)
	}

	c = DefaultConfig()
	c.LogLevel, c.StallWarning = "warn", 5*time.Second // given explicitly
	given := func(name string) bool { return name == jobenv.EnvLogLevel || name == jobenv.EnvStallCheckTime }
	if err := c.KnobsFromEnviron(func(k string) string { return env[k] }, given); err != nil {
		t.Fatal(err)
	}
	if c.LogLevel != "warn" || c.StallWarning != 5*time.Second || c.CycleTime != 2*time.Millisecond {
		t.Errorf("explicit knobs lost to the environment: log %q, stall %v, cycle %v", c.LogLevel, c.StallWarning, c.CycleTime)
	}
}

// TestKnobsFromEnvironEveryKnob: every variable of KnobVars (every knob
// of settings.Table, those to come included) sets its knob, and only it,
// from the launcher's environment, spelt as the ranks read it (the first
// valid value of a few that is not the default).
func TestKnobsFromEnvironEveryKnob(t *testing.T) {
	for _, k := range settings.Table() {
		want := DefaultConfig()
		var value string
		for _, v := range []string{"2097152", "3m", "1", "on", "/tmp/x", "debug"} {
			env := jobenv.DefaultEnv()
			if k.Env(&env.Knobs).Set(v) == nil && env.Knobs != settings.Defaults() && env.Validate() == nil {
				value, want.Knobs = v, env.Knobs
				break
			}
		}
		if value == "" {
			t.Fatalf("%s: no value to try", k.Var)
		}
		c := DefaultConfig()
		if err := c.KnobsFromEnviron(func(name string) string { return map[string]string{k.Var: value}[name] }, nil); err != nil {
			t.Fatalf("%s=%s: %v", k.Var, value, err)
		}
		if c.Knobs != want.Knobs {
			t.Errorf("%s=%s gave %+v, want %+v", k.Var, value, c.Knobs, want.Knobs)
		}
	}
}

// TestKnobsFromEnvironErrors: a bad value is an error naming the variable
// and its value, and leaves the config as it was.
func TestKnobsFromEnvironErrors(t *testing.T) {
	for _, tt := range []struct {
		name, value, want string
	}{
		{jobenv.EnvCycleTime, "fast", `GOROVOD_CYCLE_TIME="fast": not a Go duration`},
		{jobenv.EnvCycleTime, "0s", "GOROVOD_CYCLE_TIME=0s: must be positive"},
		{jobenv.EnvCacheCapacity, "-1", "GOROVOD_CACHE_CAPACITY=-1: must not be negative"},
		{jobenv.EnvFusionThreshold, "64MB", `GOROVOD_FUSION_THRESHOLD="64MB": not a decimal integer`},
		{jobenv.EnvLogLevel, "loud", `GOROVOD_LOG_LEVEL="loud"`},
		{jobenv.EnvNoSharedMemory, "yes", `GOROVOD_NO_SHARED_MEMORY="yes": not 1 or 0`},
		{jobenv.EnvTLS, "on", `GOROVOD_TLS="on": not 1 or 0`},
		{jobenv.EnvStallShutdownTime, "30s", "GOROVOD_STALL_SHUTDOWN_TIME=30s: must not be shorter than GOROVOD_STALL_CHECK_TIME=1m0s"},
	} {
		c := DefaultConfig()
		err := c.KnobsFromEnviron(func(k string) string {
			if k == tt.name {
				return tt.value
			}
			return ""
		}, nil)
		if !errors.Is(err, jobenv.ErrEnv) || !strings.Contains(err.Error(), tt.want) ||
			!strings.Contains(err.Error(), tt.name+" comes from gorun's environment") {
			t.Errorf("%s=%s: %v\nwant jobenv.ErrEnv containing %s", tt.name, tt.value, err, tt.want)
		}
		if c.Knobs != settings.Defaults() {
			t.Errorf("%s=%s: config changed by a failed call: %+v", tt.name, tt.value, c)
		}
	}
	// The relation between an explicit knob and one from the environment.
	c := DefaultConfig()
	c.StallWarning = 10 * time.Second
	err := c.KnobsFromEnviron(func(k string) string {
		return map[string]string{jobenv.EnvStallShutdownTime: "30s"}[k]
	}, func(name string) bool { return name == jobenv.EnvStallCheckTime })
	if err != nil || c.StallShutdown != 30*time.Second {
		t.Errorf("stall shutdown 30s from the environment with a 10s check: %v, %v", c.StallShutdown, err)
	}
}
