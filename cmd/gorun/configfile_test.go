package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner"
)

// writeConfig writes text to a config file in a temporary directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gorun.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFileSets: every kind of flag can come from the file: ints,
// durations, booleans, strings, lists for -H and -x, underscores for
// dashes, and aliases.
func TestConfigFileSets(t *testing.T) {
	clearKnobEnv(t)
	path := writeConfig(t, `# a job
n: 3
hosts: [a:2, "b:1,c:1"]
x:
  - A
  - B=1,2
start_timeout: 90
fusion-threshold-mb: 8
cycle_time_ms: 2.5
verbose: true
no_shared_memory: yes
op-timeout: 1m30s
log-level: debug
output-filename: /o
bind-to: core
`)
	cfg, err := parse(t, "--config-file", path, "./train")
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := runner.ParseHosts("a:2,b:1,c:1")
	if cfg.NP != 3 || !slices.Equal(cfg.Hosts, hosts) || !slices.Equal(cfg.ForwardEnv, []string{"A", "B=1,2"}) {
		t.Errorf("np %d, hosts %v, -x %q", cfg.NP, cfg.Hosts, cfg.ForwardEnv)
	}
	if cfg.StartTimeout != 90*time.Second || cfg.FusionThreshold != 8<<20 || cfg.CycleTime != 2500*time.Microsecond ||
		!cfg.Verbose || !cfg.NoSharedMemory || cfg.OpTimeout != 90*time.Second || cfg.LogLevel != "debug" ||
		cfg.OutputDir != "/o" || cfg.BindTo != runner.BindCore {
		t.Errorf("config from file:\n%s", fmtConfig(cfg))
	}
}

// TestConfigFilePrecedence: command line, then config file, then
// environment, then default.
func TestConfigFilePrecedence(t *testing.T) {
	clearKnobEnv(t)
	def := runner.DefaultConfig()
	file := writeConfig(t, "fusion-threshold-mb: 8\ncycle-time-ms: 3\n")
	t.Setenv(jobenv.EnvFusionThreshold, "16777216") // 16 MiB
	t.Setenv(jobenv.EnvCycleTime, "7ms")
	t.Setenv(jobenv.EnvCacheCapacity, "77")
	for _, tc := range []struct {
		name      string
		args      []string
		fusion    int64
		cycle     time.Duration
		cache     int
		stallWarn time.Duration
	}{
		{"flag over file", []string{"--config-file", file, "--fusion-threshold-mb", "4", "-np", "1", "p"}, 4 << 20, 3 * time.Millisecond, 77, def.StallWarning},
		{"flag after file on the line", []string{"--fusion-threshold-mb", "4", "--config-file", file, "-np", "1", "p"}, 4 << 20, 3 * time.Millisecond, 77, def.StallWarning},
		{"file over environment", []string{"--config-file", file, "-np", "1", "p"}, 8 << 20, 3 * time.Millisecond, 77, def.StallWarning},
		{"environment without a file", []string{"-np", "1", "p"}, 16 << 20, 7 * time.Millisecond, 77, def.StallWarning},
	} {
		cfg, err := parse(t, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.FusionThreshold != tc.fusion || cfg.CycleTime != tc.cycle || cfg.CacheCapacity != tc.cache || cfg.StallWarning != tc.stallWarn {
			t.Errorf("%s: fusion %d, cycle %v, cache %d, stall %v; want %d, %v, %d, %v", tc.name,
				cfg.FusionThreshold, cfg.CycleTime, cfg.CacheCapacity, cfg.StallWarning, tc.fusion, tc.cycle, tc.cache, tc.stallWarn)
		}
	}
	// A list on the command line replaces the file's, rather than adding to it.
	hostsFile := writeConfig(t, "hosts: [a:1, b:1]\n")
	cfg, err := parse(t, "--config-file", hostsFile, "-H", "c:2", "p")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := runner.ParseHosts("c:2"); !slices.Equal(cfg.Hosts, want) || cfg.NP != 2 {
		t.Errorf("hosts %v, np %d; want c:2 only", cfg.Hosts, cfg.NP)
	}
}

// TestConfigFileErrors: each mistake in a config file is a usage error
// with the file, the line and what is wrong.
func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"np: 2\nfusion-treshold-mb: 8\n", `line 2: unknown key "fusion-treshold-mb"; did you mean fusion-threshold-mb?`},
		{"np: 2\nepochs: 3\n", `line 2: unknown key "epochs"`},
		{"np: 2\nn: 3\n", "line 2: n sets np again (line 1)"},
		{"np: 2\nnum_proc: 3\n", "line 2: num_proc sets np again (line 1)"},
		{"np:\n", "line 1: np has no value"},
		{"np: [1, 2]\n", "line 1: np takes one value, not a list"},
		{"hosts: []\n", "line 1: hosts is an empty list"},
		{"hosts:\n  - a:1\n  - [b]\n", "line 3: an item of hosts must be a value, not a list"},
		{"timeline-filename:\n  path: /t\n", "line 2: timeline-filename takes a value, not a mapping"},
		{"- np\n- 2\n", "line 1: want a mapping of flags to values (np: 4), not a list"},
		{"np 2\n", `line 1: want a mapping of flags to values (np: 4), not the value "np 2"`},
		{"np: 2\n---\nnp: 3\n", "line 3: a second YAML document; want one mapping of flags to values"},
		{"config-file: other.yaml\n", "line 1: config-file cannot be set in a config file"},
		{"check_build: true\n", "line 1: check_build cannot be set in a config file"},
		{"np: two\n", `line 1: np: invalid value "two": parse error`},
		{"start-timeout: soon\n", `line 1: start-timeout: invalid value "soon": want a duration such as 30s or 1m30s, or seconds`},
		{"verbose: maybe\n", `line 1: verbose: invalid value "maybe": parse error`},
		{"np: 2\n  bad: indent\n", "not valid YAML: line 2: mapping values are not allowed in this context"},
	} {
		path := writeConfig(t, tc.text)
		_, err := parse(t, "--config-file", path, "./train")
		want := "--config-file " + path + ": " + tc.want
		if err == nil || !isUsage(err) || err.Error() != want {
			t.Errorf("config %q:\n got %v\nwant %s", tc.text, err, want)
		}
	}
	_, err := parse(t, "--config-file", filepath.Join(t.TempDir(), "missing.yaml"), "./train")
	if err == nil || !isUsage(err) {
		t.Errorf("missing file: %v, want a usage error", err)
	}
}

// TestConfigFileEmpty: an empty file, or one with comments only, sets
// nothing.
func TestConfigFileEmpty(t *testing.T) {
	clearKnobEnv(t)
	for _, text := range []string{"", "# nothing yet\n", "---\n"} {
		cfg, err := parse(t, "--config-file", writeConfig(t, text), "-np", "2", "./train")
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if def := runner.DefaultConfig(); cfg.NP != 2 || cfg.FusionThreshold != def.FusionThreshold {
			t.Errorf("%q: np %d, fusion %d", text, cfg.NP, cfg.FusionThreshold)
		}
	}
}

// configOfSize is a valid config file (np: 2) padded with a comment to
// exactly n bytes.
func configOfSize(n int) string {
	head := "np: 2\n#"
	return head + strings.Repeat("x", n-len(head)-1) + "\n"
}

// TestConfigFileSizeLimit: a config file may hold maxConfigFile bytes; one
// byte more, or an endless device such as /dev/zero or /dev/urandom, is a
// usage error naming the file and the limit, after reading at most one
// byte past the limit.
func TestConfigFileSizeLimit(t *testing.T) {
	clearKnobEnv(t)
	cfg, err := parse(t, "--config-file", writeConfig(t, configOfSize(maxConfigFile)), "./train")
	if err != nil || cfg.NP != 2 {
		t.Fatalf("file of exactly %d bytes: np %d, err %v; want np 2", maxConfigFile, cfg.NP, err)
	}
	for _, path := range []string{writeConfig(t, configOfSize(maxConfigFile+1)), "/dev/zero", "/dev/urandom"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parse(t, "--config-file", path, "./train")
		runtime.ReadMemStats(&after)
		want := "--config-file " + path + ": larger than 1 MiB, the most a config file may hold"
		if err == nil || !isUsage(err) || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", path, err, want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 { // the flags' parsing counts too
			t.Errorf("%s: reading it allocated %d MiB", path, alloc>>20)
		}
	}
}
