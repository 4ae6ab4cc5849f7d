package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/runner"
)

// parse runs the app on args with a launch function that records the
// Config instead of starting anything.
func parse(t *testing.T, args ...string) (runner.Config, error) {
	t.Helper()
	var cfg runner.Config
	var out bytes.Buffer
	app := newApp(&out, &out, func(c runner.Config) error { cfg = c; return nil })
	err := app.Run(append([]string{"gorun"}, args...))
	return cfg, err
}

func TestFlagsToConfig(t *testing.T) {
	cfg, err := parse(t, "-np", "3", "-H", "a:2", "-H", "b:1,c:1", "-p", "2222", "-i", "/k", "--start-timeout", "90",
		"--bind-addr", "10.0.0.1", "--network-interface", "eth1", "--output-filename", "/o", "--verbose",
		"--metrics-dir", "/m", "-x", "A,B", "-x", "C=1,2", "--fusion-threshold-mb", "8", "--cycle-time-ms", "2.5", "--cache-capacity", "0",
		"--stall-check-time", "30s", "--stall-shutdown-time", "2m", "--timeline-filename", "/t.json",
		"--log-level", "debug", "--op-timeout", "1.5", "--min-np", "2", "--reset-limit", "5",
		"--", "./train", "-np", "9", "--epochs", "3")
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := runner.ParseHosts("a:2,b:1,c:1")
	want := runner.DefaultConfig()
	want.NP, want.Hosts, want.Command = 3, hosts, []string{"./train", "-np", "9", "--epochs", "3"}
	want.SSHPort, want.SSHIdentityFile, want.StartTimeout = 2222, "/k", 90*time.Second
	want.BindAddr, want.NetworkInterface, want.OutputDir, want.Verbose = "10.0.0.1", "eth1", "/o", true
	want.ForwardEnv = []string{"A", "B", "C=1,2"}
	want.FusionThreshold, want.CycleTime, want.CacheCapacity = 8<<20, 2500*time.Microsecond, 0
	want.StallWarning, want.StallShutdown, want.TimelinePath = 30*time.Second, 2*time.Minute, "/t.json"
	want.LogLevel, want.OpTimeout = "debug", 1500*time.Millisecond
	want.MinNP, want.ResetLimit = 2, 5
	want.MetricsDir = "/m"
	if !slices.Equal(cfg.Hosts, want.Hosts) || !slices.Equal(cfg.Command, want.Command) ||
		!slices.Equal(cfg.ForwardEnv, want.ForwardEnv) {
		t.Errorf("hosts %v, command %q, -x %q", cfg.Hosts, cfg.Command, cfg.ForwardEnv)
	}
	cfg.Hosts, cfg.Command, cfg.ForwardEnv = nil, nil, nil
	want.Hosts, want.Command, want.ForwardEnv = nil, nil, nil
	if !equalConfig(cfg, want) {
		t.Errorf("config\n%s\nwant\n%s", fmtConfig(cfg), fmtConfig(want))
	}
}

// equalConfig compares configs without their slices, writers and functions.
func equalConfig(a, b runner.Config) bool { return fmtConfig(a) == fmtConfig(b) }

// fmtConfig formats the scalar fields of c.
func fmtConfig(c runner.Config) string {
	return fmt.Sprint(c.NP, c.Dir, c.StartTimeout, c.BindAddr, c.NetworkInterface, c.OutputDir, c.Verbose,
		c.SSHPort, c.SSHIdentityFile, c.SSHConnectTimeout, c.FusionThreshold, c.CycleTime, c.CacheCapacity,
		c.StallWarning, c.StallShutdown, c.TimelinePath, c.LogLevel, c.OpTimeout, c.GracePeriod, c.MinNP, c.ResetLimit, c.MetricsDir)
}

func TestFlagsDefaults(t *testing.T) {
	cfg, err := parse(t, "-np", "2", "./train")
	if err != nil {
		t.Fatal(err)
	}
	want := runner.DefaultConfig()
	want.NP = 2
	if cfg.Hosts != nil || !equalConfig(cfg, want) {
		t.Errorf("config\n%s\nwant\n%s", fmtConfig(cfg), fmtConfig(want))
	}
}

func TestFlagsNPDefaultsToSlots(t *testing.T) {
	cfg, err := parse(t, "-H", "a:2,b:3", "./train")
	if err != nil || cfg.NP != 5 {
		t.Errorf("NP = %d, %v; want 5", cfg.NP, err)
	}
}

func TestFlagsProgramArgsUntouched(t *testing.T) {
	for _, args := range [][]string{
		{"-np", "1", "./train", "-h", "--", "-np", "4"},
		{"-np", "1", "--", "./train", "-h", "--", "-np", "4"},
		{"-np", "1", "help", "-h"},
		{"-np", "1", "h"},
	} {
		cfg, err := parse(t, args...)
		i := slices.Index(args, "1") + 1
		if args[i] == "--" {
			i++
		}
		if err != nil || !slices.Equal(cfg.Command, args[i:]) {
			t.Errorf("%q: command %q, %v; want %q", args, cfg.Command, err, args[i:])
		}
	}
}

func TestUsageErrors(t *testing.T) {
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("a slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "2"}, "no program to run"},
		{[]string{"./train"}, "-np is required"},
		{[]string{"-np", "2", "-H", "a:1", "-hostfile", hostfile, "./train"}, "mutually exclusive"},
		{[]string{"-np", "2", "--bogus", "./train"}, "flag provided but not defined: -bogus"},
		{[]string{"-np", "x", "./train"}, `invalid value "x" for flag -np`},
		{[]string{"-np", "2", "-H", "a:0", "./train"}, `item 1 "a:0"`},
		{[]string{"-np", "2", "-hostfile", hostfile + ".missing", "./train"}, "no such file"},
		{[]string{"-np", "2", "--stall-check-time", "soon", "./train"}, "want a duration"},
		{[]string{"-np", "2", "--cycle-time-ms", "0", "./train"}, "--cycle-time-ms 0"},
		{[]string{"-np", "2", "--fusion-threshold-mb", "-1", "./train"}, "--fusion-threshold-mb -1"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"gorun"}, tt.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", tt.args, code)
		}
		got := stderr.String()
		if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "gorun: ") || !strings.Contains(got, tt.want) {
			t.Errorf("%q: stderr %q, want one gorun: line containing %q", tt.args, got, tt.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("x"), 1},
		{usagef("bad"), 2},
		{runner.ErrSlots, 2},
		{&runner.ExitError{Rank: 1, Status: 7}, 7},
		{&runner.ExitError{Rank: 1, Status: -1, Signal: "SIGSEGV"}, 1},
		{errors.Join(runner.ErrInterrupted, context.Canceled), 130},
	} {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "90": 90 * time.Second, "0.25": 250 * time.Millisecond, "0": 0} {
		var d duration
		if err := d.Set(in); err != nil || d.d != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, d.d, err, want)
		}
	}
	for _, in := range []string{"", "soon", "NaN", "1e30"} {
		var d duration
		if err := d.Set(in); err == nil {
			t.Errorf("Set(%q) = nil, want an error", in)
		}
	}
}

// TestLauncherFlag: inside a Slurm allocation with no hosts given, gorun
// takes the allocation's nodes and starts ranks through srun; -H or
// --launcher override that, and srun outside an allocation is refused.
func TestLauncherFlag(t *testing.T) {
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if _, err := parse(t, "--launcher", "srun", "./train"); err == nil || !strings.Contains(err.Error(), "needs a Slurm allocation") {
		t.Errorf("srun outside an allocation: %v", err)
	}
	if _, err := parse(t, "--launcher", "pbs", "-np", "2", "./train"); err == nil || !strings.Contains(err.Error(), `--launcher "pbs"`) {
		t.Errorf("unknown launcher: %v", err)
	}
	cfg, err := parse(t, "-np", "2", "./train")
	if err != nil || cfg.Launcher != runner.SpawnAuto || cfg.Hosts != nil {
		t.Errorf("outside an allocation: launcher %q, hosts %v, %v", cfg.Launcher, cfg.Hosts, err)
	}

	t.Setenv("SLURM_JOB_ID", "12")
	t.Setenv("SLURM_JOB_NODELIST", "gpu[1-2]")
	t.Setenv("SLURM_JOB_CPUS_PER_NODE", "4(x2)")
	t.Setenv("SLURM_TASKS_PER_NODE", "2(x2)")
	cfg, err = parse(t, "./train")
	if err != nil || cfg.Launcher != runner.SpawnSrun || runner.FormatHosts(cfg.Hosts) != "gpu1:2,gpu2:2" || cfg.NP != 4 {
		t.Errorf("in an allocation: launcher %q, hosts %v, np %d, %v", cfg.Launcher, cfg.Hosts, cfg.NP, err)
	}
	cfg, err = parse(t, "-H", "a:2", "./train")
	if err != nil || cfg.Launcher != runner.SpawnAuto || runner.FormatHosts(cfg.Hosts) != "a:2" {
		t.Errorf("-H in an allocation: launcher %q, hosts %v, %v", cfg.Launcher, cfg.Hosts, err)
	}
	cfg, err = parse(t, "--launcher", "local", "-np", "2", "./train")
	if err != nil || cfg.Launcher != runner.SpawnLocal || cfg.Hosts != nil {
		t.Errorf("--launcher local in an allocation: launcher %q, hosts %v, %v", cfg.Launcher, cfg.Hosts, err)
	}
	t.Setenv("SLURM_JOB_NODELIST", "gpu[1-")
	if _, err := parse(t, "./train"); err == nil || !strings.Contains(err.Error(), "SLURM_JOB_NODELIST") {
		t.Errorf("bad node list: %v", err)
	}
}

// TestNumProcAliases: -n and --num-proc, mpirun's and horovodrun's
// spellings, set -np.
func TestNumProcAliases(t *testing.T) {
	for _, flag := range []string{"-n", "--num-proc", "-np"} {
		cfg, err := parse(t, flag, "3", "./train")
		if err != nil || cfg.NP != 3 {
			t.Errorf("%s 3: np %d, %v", flag, cfg.NP, err)
		}
	}
}

// TestOutputFlags: --output-ranks and --prefix-output-with-timestamp reach
// the Config; a rank list that is not one is a usage error.
func TestOutputFlags(t *testing.T) {
	cfg, err := parse(t, "-np", "4", "--output-ranks", "0, 3", "--prefix-output-with-timestamp", "./train")
	if err != nil || !slices.Equal(cfg.OutputRanks, []int{0, 3}) || !cfg.TimestampOutput {
		t.Fatalf("ranks %v, timestamp %v, %v", cfg.OutputRanks, cfg.TimestampOutput, err)
	}
	if cfg, err := parse(t, "-np", "4", "./train"); err != nil || cfg.OutputRanks != nil || cfg.TimestampOutput {
		t.Fatalf("defaults: ranks %v, timestamp %v, %v", cfg.OutputRanks, cfg.TimestampOutput, err)
	}
	for _, bad := range []string{"x", "0,-1", "1,,2"} {
		want := fmt.Sprintf("--output-ranks %q: want ranks (non-negative integers) separated by commas, as 0 or 0,3", bad)
		if _, err := parse(t, "-np", "4", "--output-ranks", bad, "./train"); err == nil || !isUsage(err) || err.Error() != want {
			t.Errorf("--output-ranks %q: %v, want %s", bad, err, want)
		}
	}
}

// TestFlagsAfterProgram: gorun's flags written after the program go to it,
// with a note that says so; after "--" there is no note, and a program's
// own flags that gorun does not have get none either.
func TestFlagsAfterProgram(t *testing.T) {
	for _, c := range []struct {
		args []string
		note string
	}{
		{[]string{"-np", "2", "./hello", "-np", "4", "--verbose", "--epochs", "3"},
			"gorun: note: -np --verbose after the program ./hello go to the program, not to gorun; gorun's flags go before the program (write -- before it to pass them on without this note)\n"},
		{[]string{"-np", "2", "./hello", "--x=1"},
			"gorun: note: --x=1 after the program ./hello goes to the program, not to gorun; gorun's flags go before the program (write -- before it to pass them on without this note)\n"},
		{[]string{"-np", "2", "--", "./hello", "-np", "4"}, ""},
		{[]string{"-np", "2", "./hello", "--epochs", "3"}, ""},
	} {
		var out, errOut bytes.Buffer
		var cfg runner.Config
		app := newApp(&out, &errOut, func(c runner.Config) error { cfg = c; return nil })
		args := append([]string{"gorun"}, c.args...)
		app.Metadata = map[string]any{rawArgsKey: args}
		if err := app.Run(args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := errOut.String(); got != c.note {
			t.Errorf("%q: stderr %q, want %q", c.args, got, c.note)
		}
		if cfg.NP != 2 || cfg.Command[0] != "./hello" {
			t.Errorf("%q: np %d, command %q", c.args, cfg.NP, cfg.Command)
		}
	}
}

// TestPSFlags: --ps, --evaluator and --evaluator-timeout reach the
// Config; without -np the workers take the slots the servers leave; --ps 0
// is a usage error; a chief's status is gorun's.
func TestPSFlags(t *testing.T) {
	cfg, err := parse(t, "--ps", "2", "-H", "a:2,b:3", "--evaluator", "--evaluator-timeout", "90", "./train")
	if err != nil || cfg.PS != 2 || cfg.NP != 3 || !cfg.Evaluator || cfg.EvaluatorTimeout != 90*time.Second {
		t.Errorf("PS %d NP %d evaluator %v timeout %v, %v; want 2, 3, true, 1m30s", cfg.PS, cfg.NP, cfg.Evaluator, cfg.EvaluatorTimeout, err)
	}
	if cfg, err := parse(t, "--ps", "1", "-np", "2", "./train"); err != nil || cfg.PS != 1 || cfg.NP != 2 || cfg.Evaluator {
		t.Errorf("PS %d NP %d evaluator %v, %v", cfg.PS, cfg.NP, cfg.Evaluator, err)
	}
	// --ps 0 written out is not the all-reduce job of no --ps.
	want := "--ps 0: a parameter-server job needs at least 1 server (leave --ps out for an all-reduce job)"
	if _, err := parse(t, "--ps", "0", "-np", "2", "./train"); err == nil || !isUsage(err) || err.Error() != want {
		t.Errorf("--ps 0: %v, want the usage error %q", err, want)
	}
	chief := &runner.TaskError{Role: "chief", Host: "a", Err: &runner.ExitError{Status: 4}}
	if got := exitCode(chief); got != 4 {
		t.Errorf("exitCode(%v) = %d, want 4", chief, got)
	}
}
