package launchtest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testenv"
)

// runTimeout bounds one launched job.
const runTimeout = 3 * time.Minute

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// bin returns the path of the named program (gorun, hello,
// allreduce_bench, mnist, elasticrank, freezerank, metricsrank, synthetic_benchmark), building them
// all on first use.
func bin(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "launchtest-bin-"); buildErr != nil {
			return
		}
		for pkg, out := range map[string]string{"../cmd/gorun": "gorun", "../examples/hello": "hello",
			"../examples/allreduce_bench": "allreduce_bench", "../examples/mnist": "mnist",
			"./testdata/elasticrank": "elasticrank", "./testdata/freezerank": "freezerank", "./testdata/psjoin": "psjoin", "./testdata/metricsrank": "metricsrank",
			"../examples/synthetic_benchmark": "synthetic_benchmark"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, out), pkg)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = errors.New("go build " + pkg + ": " + err.Error() + "\n" + string(b))
				return
			}
		}
		// Slurm's daemons run tasks as root in their own mount namespace:
		// keep the binaries where every node can read them.
		os.Chmod(binDir, 0o755)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// need skips t (or fails it under GOROVOD_REQUIRE_CLUSTER=1) unless every
// program is on PATH.
func need(t *testing.T, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			if testenv.Required(testenv.RequireCluster) {
				t.Fatalf("%s is not installed (apt-get install openmpi-bin mpich slurm-wlm munge)", p)
			}
			t.Skipf("%s is not installed", p)
		}
	}
}

// result is what a finished command printed and how it ended.
type result struct {
	stdout, stderr string
	code           int
}

// run runs cmd to its end (killing it after runTimeout) and returns what
// it printed.
func run(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	return runAll(t, cmd)[0]
}

// runAll starts every command, then waits for all of them (killing those
// left after runTimeout), and returns what each printed.
func runAll(t *testing.T, cmds ...*exec.Cmd) []result {
	t.Helper()
	outs := make([]*bytes.Buffer, 2*len(cmds))
	done := make(chan int, len(cmds))
	errs := make([]error, len(cmds))
	for i, cmd := range cmds {
		outs[2*i], outs[2*i+1] = new(bytes.Buffer), new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[2*i], outs[2*i+1]
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", cmd.Path, err)
		}
		go func() { errs[i] = cmd.Wait(); done <- i }()
	}
	timeout := time.After(runTimeout)
	for ended := 0; ended < len(cmds); {
		select {
		case <-done:
			ended++
		case <-timeout:
			for _, cmd := range cmds {
				cmd.Process.Kill()
			}
			for ; ended < len(cmds); ended++ {
				<-done
			}
			t.Fatalf("%s did not end within %v", strings.Join(cmds[0].Args, " "), runTimeout)
		}
	}
	res := make([]result, len(cmds))
	for i, err := range errs {
		res[i] = result{stdout: outs[2*i].String(), stderr: outs[2*i+1].String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res[i].code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", cmds[i].Path, err)
		}
	}
	return res
}

// command returns an exec.Cmd for argv with extra "NAME=value" entries
// added to this process's environment.
func command(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// mustSucceed fails t unless r ended with status 0.
func mustSucceed(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit status %d\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
	}
}

// benchWrong checks that an allreduce_bench report has rows and that every
// row's #wrong column is 0.
func benchWrong(t *testing.T, out string) {
	t.Helper()
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 8 || f[2] != "float32" {
			continue
		}
		rows++
		if f[7] != "0" {
			t.Errorf("wrong elements: %s", line)
		}
	}
	if rows == 0 {
		t.Errorf("no result rows in:\n%s", out)
	}
}

// benchArgs keeps allreduce_bench short.
var benchArgs = []string{"-sizes", "4K,1M", "-budget", "0.05", "-warm-budget", "0.02"}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
