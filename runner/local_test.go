package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

var localSlot = Slot{Host: "localhost", Size: 1, LocalSize: 1, CrossSize: 1}

// spawnSh starts `sh -c script` with a LocalSpawner.
func spawnSh(t *testing.T, script string, c Command) (Process, *testutil.SyncBuffer, *testutil.SyncBuffer) {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	c.Argv = []string{"sh", "-c", script}
	p, err := LocalSpawner{}.Spawn(t.Context(), localSlot, c, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	return p, &stdout, &stderr
}

// waitFor waits up to 5s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func TestLocalSpawnerOutputAndStatus(t *testing.T) {
	p, stdout, stderr := spawnSh(t, `echo out; echo err >&2; printf tail; exit 5`, Command{})
	err := p.Wait()
	if ee, ok := errors.AsType[*ExitError](err); !ok || ee.Status != 5 || ee.Rank != 0 || ee.Host != "localhost" {
		t.Errorf("Wait = %v, want an ExitError with status 5", err)
	}
	if stdout.String() != "out\ntail" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Wait = %v, want os.ErrProcessDone", err)
	}
}

func TestLocalSpawnerEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GORUN_TEST_INHERITED", "yes")
	c := Command{Env: []string{"GORUN_TEST_SET=1", "GORUN_TEST_INHERITED=overridden"}, Dir: dir}
	p, stdout, _ := spawnSh(t, `echo "$GORUN_TEST_SET $GORUN_TEST_INHERITED $(pwd -P)"`, c)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	realDir, err := filepath.EvalSymlinks(dir) // pwd -P resolves links
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "1 overridden "+realDir+"\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestLocalSpawnerSignalReachesGroup(t *testing.T) {
	p, stdout, _ := spawnSh(t, `sleep 60 & echo $!; wait`, Command{})
	waitFor(t, "the child's pid", func() bool { return strings.HasSuffix(stdout.String(), "\n") })
	child, _ := strconv.Atoi(strings.TrimSpace(stdout.String()))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := p.Wait()
	if ee, ok := errors.AsType[*ExitError](err); !ok || ee.Signal != "SIGTERM" {
		t.Errorf("Wait = %v, want killed by SIGTERM", err)
	}
	waitFor(t, "the grandchild to die", func() bool { return !alive(child) })
}

func TestLocalSpawnerKillsStragglers(t *testing.T) {
	p, stdout, _ := spawnSh(t, `sleep 60 & echo $!`, Command{})
	start := time.Now()
	if err := p.Wait(); err != nil {
		t.Errorf("Wait = %v, want nil", err)
	}
	if d := time.Since(start); d > localWaitDelay+2*time.Second {
		t.Errorf("Wait took %v with a straggler holding the pipe", d)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(stdout.String()))
	waitFor(t, "the straggler to die", func() bool { return !alive(child) })
}

func TestLocalSpawnerKill(t *testing.T) {
	p, _, _ := spawnSh(t, `trap '' TERM; sleep 60`, Command{})
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if ee, ok := errors.AsType[*ExitError](p.Wait()); !ok || ee.Signal != "SIGKILL" || ee.Status != -1 {
		t.Errorf("Wait = %v, want killed by SIGKILL", ee)
	}
}

func TestLocalSpawnerStartError(t *testing.T) {
	c := Command{Argv: []string{"/nonexistent/gorun-test-program"}}
	_, err := LocalSpawner{}.Spawn(t.Context(), localSlot, c, &testutil.SyncBuffer{}, &testutil.SyncBuffer{})
	if err == nil || !strings.HasPrefix(err.Error(), "runner: rank 0 on localhost: start ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Spawn = %v, want a start error naming rank 0 and wrapping ErrNotExist", err)
	}
}
