package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/runner/internal/testsshd"
)

// sshTarget is a "remote" host for the ssh spawner's tests and the
// configuration that reaches it.
type sshTarget struct {
	host string
	cfg  SSHConfig
	real bool // a real sshd, not the fake client
}

// sshTestGrace is the remote grace period of the tests.
const sshTestGrace = time.Second

// sshTestStart bounds how long the tests wait for a remote program to
// start and show itself (its pid, its output, its environment). A fresh
// clone's CI run with two busy loops beside it once saw two such programs,
// started through the real sshd while other packages' tests ran, write no
// pid within the 10 s these waits had; a wait that succeeds ends as soon
// as the program shows itself.
const sshTestStart = 60 * time.Second

// forEachSSHTarget runs f as subtest "fake", against a fake ssh client that
// runs the remote command locally in a new session (as sshd does), and as
// subtest "sshd", against a real OpenSSH sshd on 127.0.0.2 (skipped when
// sshd is not installed).
func forEachSSHTarget(t *testing.T, f func(t *testing.T, tg sshTarget)) {
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		f(t, fakeSSHTarget(t))
	})
	t.Run("sshd", func(t *testing.T) {
		t.Parallel()
		f(t, sshdTarget(t))
	})
}

// sshdTarget starts a real sshd for t.
func sshdTarget(t *testing.T) sshTarget {
	t.Helper()
	srv := testsshd.Start(t)
	return sshTarget{host: srv.Host, real: true, cfg: SSHConfig{
		Port: srv.Port, IdentityFile: srv.IdentityFile, ExtraArgs: srv.ExtraArgs(),
		ConnectTimeout: 5 * time.Second, GracePeriod: sshTestGrace,
	}}
}

// sshFakeName is the name under which the test binary acts as a fake ssh
// client (see init).
const sshFakeName = "gorovod-test-fake-ssh"

// init turns the test binary into a fake ssh client when it runs as
// sshFakeName: it skips ssh's options and the host, and runs the remote command
// with /bin/sh in a new session (as sshd does), passing its input and
// output through, and exits with its status, or 255 when it was killed by
// a signal (as ssh does).
func init() {
	if filepath.Base(os.Args[0]) != sshFakeName {
		return
	}
	args := os.Args[1:]
	for len(args) > 0 && args[0] != "--" {
		args = args[1:]
	}
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "fake ssh: want OPTIONS -- HOST COMMAND, got %q\n", os.Args[1:])
		os.Exit(255)
	}
	cmd := exec.Command("/bin/sh", "-c", args[2])
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Run()
	var xe *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &xe) && xe.ExitCode() >= 0:
		os.Exit(xe.ExitCode())
	}
	os.Exit(255)
}

// fakeSSHTarget links the test binary as the fake ssh client.
func fakeSSHTarget(t *testing.T) sshTarget {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), sshFakeName)
	if err := os.Symlink(self, path); err != nil {
		t.Fatal(err)
	}
	return sshTarget{host: "fakehost", cfg: SSHConfig{SSHPath: path, GracePeriod: sshTestGrace}}
}

// sshRank is a rank started by a test, with its output.
type sshRank struct {
	p              *sshProcess
	stdout, stderr *sshTestOutput
}

// spawnSSH starts c on tg as rank 5, with gorun's environment taken from
// environ when it is not nil, and kills it at the end of the test.
func spawnSSH(t *testing.T, tg sshTarget, c Command, environ []string) *sshRank {
	t.Helper()
	sp := NewSSHSpawner(tg.cfg).(*sshSpawner)
	if environ != nil {
		sp.environ = func() []string { return environ }
	}
	r := &sshRank{stdout: &sshTestOutput{}, stderr: &sshTestOutput{}}
	slot := Slot{Host: tg.host, Rank: 5, Size: 8, LocalSize: 1, CrossSize: 1}
	p, err := sp.Spawn(t.Context(), slot, c, r.stdout, r.stderr)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p.(*sshProcess)
	t.Cleanup(func() {
		_ = r.p.Kill()
		_ = r.p.Wait()
		if t.Failed() {
			t.Logf("rank stdout:\n%s\nrank stderr:\n%s", r.stdout, r.stderr)
		}
	})
	return r
}

// sshShCommand runs script with /bin/sh -c, with args as $1...
func sshShCommand(script string, args ...string) Command {
	return Command{Argv: append([]string{"/bin/sh", "-c", script, "sh"}, args...)}
}

// waitExit waits at most d for the rank to end and returns Wait's error.
func (r *sshRank) waitExit(t *testing.T, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.p.Wait() }() // "wait-rank": ends with the rank
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("the rank is still running after %v", d)
		return nil
	}
}

// sshTestOutput collects a rank's stream; safe for concurrent use.
type sshTestOutput struct{ testutil.SyncBuffer }

// waitFor waits until the output holds s, for at most sshTestStart.
func (o *sshTestOutput) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(sshTestStart)
	for !strings.Contains(o.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after %v; output:\n%s", s, sshTestStart, o.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sshReadPID waits until the rank wrote its pid to path and returns it,
// for at most sshTestStart.
func sshReadPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(sshTestStart)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s after %v", path, sshTestStart)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sshWaitGone waits until process pid has ended (gone or a zombie), for at
// most d.
func sshWaitGone(t *testing.T, what string, pid int, d time.Duration) {
	t.Helper()
	start := time.Now()
	for sshAlive(pid) {
		if time.Since(start) > d {
			t.Fatalf("%s (pid %d) is still alive after %v", what, pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s (pid %d) ended %v after the stop", what, pid, time.Since(start).Round(time.Millisecond))
}

// sshAlive reports whether pid is a process that has not exited.
func sshAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

// sshAsExitError returns err as an *ExitError, failing t otherwise.
func sshAsExitError(t *testing.T, err error) *ExitError {
	t.Helper()
	var xe *ExitError
	if !errors.As(err, &xe) {
		t.Fatalf("err = %v (%T), want an *ExitError", err, err)
	}
	return xe
}

// sshLauncherName is the name under which the test binary acts as a
// launcher that starts one rank over ssh and then waits to be killed (see
// init): TestSSHLauncherKilled plays a SIGKILLed gorun with it.
const sshLauncherName = "gorovod-test-launcher"

// sshLauncherJob is what the launcher runs, passed as JSON in its argument.
type sshLauncherJob struct {
	Config  SSHConfig
	Host    string
	PIDFile string // where the remote program writes its pid
}

func init() {
	if filepath.Base(os.Args[0]) != sshLauncherName || len(os.Args) != 2 {
		return
	}
	var job sshLauncherJob
	if err := json.Unmarshal([]byte(os.Args[1]), &job); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(2)
	}
	slot := Slot{Host: job.Host, Size: 1, LocalSize: 1, CrossSize: 1}
	p, err := NewSSHSpawner(job.Config).Spawn(context.Background(), slot, sshShCommand(sshSleeper, job.PIDFile), os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(2)
	}
	fmt.Printf("ssh-pid=%d\n", p.(*sshProcess).cmd.Process.Pid)
	time.Sleep(time.Minute)
	os.Exit(3)
}
