package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCPUShareBlocks: the blocks of a host's ranks are contiguous, cover
// every processor once when there are at least as many processors as
// ranks, and spread ranks evenly one processor each when there are fewer;
// the thread counts follow.
func TestCPUShareBlocks(t *testing.T) {
	for _, tc := range []struct {
		n, of       int
		bind        bool
		wantBlocks  [][2]int
		wantThreads []int
	}{
		{n: 2, of: 1, bind: true, wantBlocks: [][2]int{{0, 2}}, wantThreads: []int{2}},
		{n: 2, of: 2, bind: true, wantBlocks: [][2]int{{0, 1}, {1, 2}}, wantThreads: []int{1, 1}},
		{n: 8, of: 3, bind: true, wantBlocks: [][2]int{{0, 2}, {2, 5}, {5, 8}}, wantThreads: []int{2, 3, 3}},
		{n: 2, of: 4, bind: true, wantBlocks: [][2]int{{0, 1}, {0, 1}, {1, 2}, {1, 2}}, wantThreads: []int{1, 1, 1, 1}},
		{n: 2, of: 3, bind: true, wantBlocks: [][2]int{{0, 1}, {0, 1}, {1, 2}}, wantThreads: []int{1, 1, 1}},
		{n: 8, of: 3, wantThreads: []int{2, 2, 2}},
		{n: 2, of: 4, wantThreads: []int{1, 1, 1, 1}},
		{n: 64, of: 4, wantThreads: []int{16, 16, 16, 16}},
	} {
		for i := range tc.of {
			s := CPUShare{Index: i, Of: tc.of, Bind: tc.bind}
			if tc.wantBlocks != nil {
				if lo, hi := s.block(tc.n); [2]int{lo, hi} != tc.wantBlocks[i] {
					t.Errorf("%d processors, rank %d of %d: block [%d,%d), want %v", tc.n, i, tc.of, lo, hi, tc.wantBlocks[i])
				}
			}
			if got := s.threads(tc.n); got != tc.wantThreads[i] {
				t.Errorf("%d processors, rank %d of %d, bind %v: %d threads, want %d", tc.n, i, tc.of, tc.bind, got, tc.wantThreads[i])
			}
		}
	}
}

// TestThreadDefaults: a variable already set is left alone; the others get
// the share, GOMAXPROCS at least 2 on a host of 2 or more processors
// unless bound; no share gives nothing.
func TestThreadDefaults(t *testing.T) {
	s := CPUShare{Index: 0, Of: 2}
	got := s.threadDefaults(8, func(name string) bool { return name == "OMP_NUM_THREADS" })
	if want := []string{"GOMAXPROCS=4", "OPENBLAS_NUM_THREADS=4"}; !slices.Equal(got, want) {
		t.Errorf("defaults %q, want %q", got, want)
	}
	for _, tc := range []struct {
		share CPUShare
		n     int
		want  []string
	}{
		{CPUShare{Index: 1, Of: 2}, 2, []string{"GOMAXPROCS=2", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"}},
		{CPUShare{Index: 3, Of: 4}, 2, []string{"GOMAXPROCS=2", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"}},
		{CPUShare{Index: 1, Of: 2, Bind: true}, 2, []string{"GOMAXPROCS=1", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"}},
		{CPUShare{Index: 0, Of: 2}, 1, []string{"GOMAXPROCS=1", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"}},
		{CPUShare{Index: 0, Of: 3}, 12, []string{"GOMAXPROCS=4", "OMP_NUM_THREADS=4", "OPENBLAS_NUM_THREADS=4"}},
	} {
		if got := tc.share.threadDefaults(tc.n, func(string) bool { return false }); !slices.Equal(got, tc.want) {
			t.Errorf("%+v of %d processors: %q, want %q", tc.share, tc.n, got, tc.want)
		}
	}
	if got := (CPUShare{}).threadDefaults(8, func(string) bool { return false }); got != nil {
		t.Errorf("no share: %q, want none", got)
	}
}

// TestFormatCPUs: processor lists are written as taskset and
// /proc/self/status write them.
func TestFormatCPUs(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 2, 3, 4, 9}, "0,2-4,9"}, {[]int{64, 65, 127}, "64-65,127"},
	} {
		if got := formatCPUs(tc.cpus); got != tc.want {
			t.Errorf("formatCPUs(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
		m := maskOf(tc.cpus)
		if got := m.cpus(); !slices.Equal(got, tc.cpus) {
			t.Errorf("maskOf(%v).cpus() = %v", tc.cpus, got)
		}
	}
}

// hostCPUs returns the processors this test may run on.
func hostCPUs(t *testing.T) []int {
	t.Helper()
	m, err := threadAffinity()
	if err != nil {
		t.Fatal(err)
	}
	cpus := m.cpus()
	if len(cpus) == 0 {
		t.Fatal("no processors in the affinity mask")
	}
	return cpus
}

// shareReport is what shareScript prints of a rank: its thread variables
// and the processors it may run on.
const shareScript = `echo "GOMAXPROCS=${GOMAXPROCS-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS-unset} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS-unset}"; ` +
	`sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status`

// wantShareReport is shareScript's output for a rank with share s on
// processors cpus, where set holds the variables the environment sets.
func wantShareReport(s CPUShare, cpus []int, set map[string]string) string {
	t := fmt.Sprint(s.threads(len(cpus)))
	vals := make([]string, len(ThreadVars))
	for i, name := range ThreadVars {
		vals[i] = name + "=" + t
		if name == "GOMAXPROCS" {
			vals[i] = name + "=" + fmt.Sprint(s.goThreads(len(cpus)))
		}
		if v, ok := set[name]; ok {
			vals[i] = name + "=" + v
		}
	}
	mine := cpus
	if s.Bind {
		lo, hi := s.block(len(cpus))
		mine = cpus[lo:hi]
	}
	return strings.Join(vals, " ") + "\n" + formatCPUs(mine) + "\n"
}

// TestLocalSpawnerCPUShare: a local rank gets the thread defaults in its
// environment, except for a variable that gorun's environment or the
// command sets, and with Bind runs on its block of processors only.
func TestLocalSpawnerCPUShare(t *testing.T) {
	cpus := hostCPUs(t)
	for _, name := range ThreadVars {
		t.Setenv(name, "")
		_ = os.Unsetenv(name)
	}
	t.Setenv("OPENBLAS_NUM_THREADS", "5") // gorun's own environment wins
	for _, tc := range []struct {
		share CPUShare
		env   []string
		set   map[string]string
	}{
		{CPUShare{Index: 0, Of: 1}, nil, map[string]string{"OPENBLAS_NUM_THREADS": "5"}},
		{CPUShare{Index: 1, Of: 2, Bind: true}, nil, map[string]string{"OPENBLAS_NUM_THREADS": "5"}},
		{CPUShare{Index: 0, Of: 2, Bind: true}, []string{"GOMAXPROCS=7"}, map[string]string{"GOMAXPROCS": "7", "OPENBLAS_NUM_THREADS": "5"}},
		{CPUShare{Index: 3, Of: 4, Bind: true}, nil, map[string]string{"OPENBLAS_NUM_THREADS": "5"}},
	} {
		var stdout, stderr bytes.Buffer
		p, err := LocalSpawner{}.Spawn(context.Background(), Slot{Host: "localhost", Rank: tc.share.Index},
			Command{Argv: []string{"/bin/sh", "-c", shareScript}, Env: tc.env, CPUs: tc.share}, &stdout, &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("%+v: %v\n%s", tc.share, err, stderr.String())
		}
		if want := wantShareReport(tc.share, cpus, tc.set); stdout.String() != want {
			t.Errorf("%+v, env %q:\n got %q\nwant %q", tc.share, tc.env, stdout.String(), want)
		}
	}
	// Spawning a bound rank leaves gorun's own threads as they were.
	if got := hostCPUs(t); !slices.Equal(got, cpus) {
		t.Errorf("after spawning, this thread runs on %v, was %v", got, cpus)
	}
	// No share: nothing added, nothing bound.
	var stdout bytes.Buffer
	p, err := LocalSpawner{}.Spawn(context.Background(), Slot{Host: "localhost"},
		Command{Argv: []string{"/bin/sh", "-c", shareScript}}, &stdout, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	want := "GOMAXPROCS=unset OMP_NUM_THREADS=unset OPENBLAS_NUM_THREADS=5\n" + formatCPUs(cpus) + "\n"
	if stdout.String() != want {
		t.Errorf("no share:\n got %q\nwant %q", stdout.String(), want)
	}
}

// runPrelude runs argv through cpuPrelude for share, with env as the whole
// environment, and returns its output and error.
func runPrelude(t *testing.T, share CPUShare, env []string, argv ...string) (string, string, error) {
	t.Helper()
	full := withCPUPrelude(share, argv)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stdout.String(), stderr.String(), err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the prelude did not finish: %s", stderr.String())
		return "", "", nil
	}
}

// TestCPUPrelude: the shell prelude of ssh and srun ranks computes the
// same share as the local spawner, on the host where it runs: thread
// defaults where the environment leaves them unset, and the block of
// processors with Bind.
func TestCPUPrelude(t *testing.T) {
	cpus := hostCPUs(t)
	path := "PATH=" + os.Getenv("PATH")
	for _, tc := range []struct {
		share CPUShare
		env   []string
		set   map[string]string
	}{
		{CPUShare{Index: 0, Of: 1}, nil, nil},
		{CPUShare{Index: 0, Of: 2}, nil, nil},
		{CPUShare{Index: 3, Of: 4}, nil, nil},
		{CPUShare{Index: 1, Of: 2, Bind: true}, nil, nil},
		{CPUShare{Index: 2, Of: 3, Bind: true}, []string{"OMP_NUM_THREADS=9"}, map[string]string{"OMP_NUM_THREADS": "9"}},
		{CPUShare{Index: 0, Of: 4, Bind: true}, []string{"GOMAXPROCS="}, map[string]string{"GOMAXPROCS": ""}},
	} {
		stdout, stderr, err := runPrelude(t, tc.share, append([]string{path}, tc.env...), "/bin/sh", "-c", shareScript)
		if err != nil {
			t.Fatalf("%+v: %v\n%s", tc.share, err, stderr)
		}
		if want := wantShareReport(tc.share, cpus, tc.set); stdout != want || stderr != "" {
			t.Errorf("%+v, env %q:\n got %q (stderr %q)\nwant %q", tc.share, tc.env, stdout, stderr, want)
		}
	}
	// The program's arguments pass through untouched, and a missing
	// program is the shell's usual message.
	stdout, _, err := runPrelude(t, CPUShare{Index: 0, Of: 1, Bind: true}, []string{path}, "/bin/sh", "-c", `printf '%s|' "$@"`, "sh", "a b", "", "$HOME", "-c")
	if err != nil || stdout != "a b||$HOME|-c|" {
		t.Errorf("arguments: %q, %v", stdout, err)
	}
	_, stderr, err := runPrelude(t, CPUShare{Index: 0, Of: 1}, []string{path}, "./no-such-program")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 127 || !strings.Contains(stderr, sshWrapperName+": 1: exec: ./no-such-program: not found") {
		t.Errorf("missing program: %v, stderr %q", err, stderr)
	}
}

// TestCPUPreludeWithoutTaskset: binding on a host without taskset fails
// the rank with a message that says what is missing, rather than running
// it unbound.
func TestCPUPreludeWithoutTaskset(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"sed", "getconf", "uname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	host, _ := os.Hostname()
	_, stderr, err := runPrelude(t, CPUShare{Index: 0, Of: 2, Bind: true}, []string{"PATH=" + bin}, "/bin/true")
	want := "gorovod: --bind-to core needs taskset (util-linux) on " + host + "\n"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 127 || stderr != want {
		t.Errorf("got %v, stderr %q; want status 127 and %q", err, stderr, want)
	}
	// Without binding, taskset is not needed.
	if _, stderr, err := runPrelude(t, CPUShare{Index: 0, Of: 2}, []string{"PATH=" + bin}, "/bin/true"); err != nil {
		t.Errorf("unbound: %v, %s", err, stderr)
	}
}

// TestSSHSpawnerCPUShare: a rank started over ssh gets its share of the
// remote host's processors (here the remote host is this one).
func TestSSHSpawnerCPUShare(t *testing.T) {
	cpus := hostCPUs(t)
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		share := CPUShare{Index: 1, Of: 2, Bind: true}
		tg.cfg.ForwardEnv = []string{"OMP_NUM_THREADS=3"}
		c := Command{Argv: []string{"/bin/sh", "-c", shareScript}, CPUs: share}
		r := spawnSSH(t, tg, c, []string{"PATH=" + os.Getenv("PATH")})
		if err := r.waitExit(t, 30*time.Second); err != nil {
			t.Fatalf("%v\n%s", err, r.stderr)
		}
		if want := wantShareReport(share, cpus, map[string]string{"OMP_NUM_THREADS": "3"}); r.stdout.String() != want {
			t.Errorf("got %q, want %q", r.stdout.String(), want)
		}
	})
}

// TestElasticShareOn: a worker that an elastic job adds on a host takes
// the next of the host's slots as its processor share (bound with
// --bind-to core), and none on a host that is not listed or is full.
func TestElasticShareOn(t *testing.T) {
	j := &elasticJob{job: &job{cfg: Config{BindTo: BindCore}},
		members: []int{0, 1, 2},
		hosts:   []Host{{Name: "a", Slots: 4}, {Name: "b", Slots: 1}},
	}
	j.ranks = []*rankProc{{slot: Slot{Host: "a"}}, {slot: Slot{Host: "b"}}, {slot: Slot{Host: "a"}}}
	for _, c := range []struct {
		host string
		want CPUShare
	}{
		{"a", CPUShare{Index: 2, Of: 4, Bind: true}},
		{"b", CPUShare{}}, // full
		{"c", CPUShare{}}, // not listed
	} {
		if got := j.shareOn(c.host); got != c.want {
			t.Errorf("host %s: %+v, want %+v", c.host, got, c.want)
		}
	}
}
