package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/runner"
)

// allowedCPUs reads the processors this process may run on from
// /proc/self/status.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var cpus []int
		for _, r := range strings.Split(strings.TrimSpace(list), ",") {
			a, b, _ := strings.Cut(r, "-")
			lo, err1 := strconv.Atoi(a)
			hi, err2 := strconv.Atoi(b)
			if b == "" {
				hi, err2 = lo, nil
			}
			if err1 != nil || err2 != nil {
				t.Fatalf("Cpus_allowed_list %q", list)
			}
			for c := lo; c <= hi; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	t.Fatal("no Cpus_allowed_list in /proc/self/status")
	return nil
}

// threadsRank prints the rank, its thread variables and its processors.
const threadsRank = `echo "$GOROVOD_RANK ${GOMAXPROCS-unset} ${OMP_NUM_THREADS-unset} ${OPENBLAS_NUM_THREADS-unset} $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"`

// TestGorunThreadDefaults: each rank's environment holds its share of the
// host's processors in OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, and in
// GOMAXPROCS at least 2 (on a host of two or more), unless -x or gorun's
// environment sets one; with --bind-to core each rank runs on its own
// block of processors, and GOMAXPROCS is its size.
func TestGorunThreadDefaults(t *testing.T) {
	for _, name := range runner.ThreadVars {
		t.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	t.Setenv("OPENBLAS_NUM_THREADS", "6")
	cpus := allowedCPUs(t)
	n := len(cpus)
	all := fmt.Sprintf("%d-%d", cpus[0], cpus[n-1])
	if n == 1 {
		all = strconv.Itoa(cpus[0])
	}
	for _, tc := range []struct {
		args []string
		want func(rank int) string
	}{
		{[]string{"-np", "2"}, func(r int) string {
			share := max(1, n/2)
			return fmt.Sprintf("%d %d %d 6 %s", r, max(share, min(2, n)), share, all)
		}},
		{[]string{"-np", "2", "--bind-to", "core", "-x", "OMP_NUM_THREADS=4"}, func(r int) string {
			lo, hi := r*n/2, (r+1)*n/2
			if hi == lo {
				hi = lo + 1
			}
			return fmt.Sprintf("%d %d 4 6 %s", r, hi-lo, cpuList(cpus[lo:hi]))
		}},
	} {
		res := runGorun(t, append(tc.args, "sh", "-c", threadsRank)...)
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("%q: exit %d, stderr %q", tc.args, res.code, res.stderr)
		}
		for r := range 2 {
			if want := fmt.Sprintf("[%d]<stdout>: %s\n", r, tc.want(r)); !strings.Contains(res.stdout, want) {
				t.Errorf("%q: stdout lacks %q:\n%s", tc.args, want, res.stdout)
			}
		}
	}
}

// cpuList writes processors as /proc/self/status does (0-3,8).
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// TestBindToFlag: --bind-to takes core or none, and nothing else.
func TestBindToFlag(t *testing.T) {
	for _, tc := range []struct{ value, want string }{{"core", runner.BindCore}, {"none", runner.BindNone}} {
		cfg, err := parse(t, "--bind-to", tc.value, "-np", "1", "p")
		if err != nil || cfg.BindTo != tc.want {
			t.Errorf("--bind-to %s: %q, %v", tc.value, cfg.BindTo, err)
		}
	}
	if cfg, err := parse(t, "-np", "1", "p"); err != nil || cfg.BindTo != runner.BindNone {
		t.Errorf("default: %q, %v; want none", cfg.BindTo, err)
	}
	_, err := parse(t, "--bind-to", "socket", "-np", "1", "p")
	if want := `--bind-to "socket": want core or none`; err == nil || !isUsage(err) || err.Error() != want {
		t.Errorf("--bind-to socket: %v, want %s", err, want)
	}
}
