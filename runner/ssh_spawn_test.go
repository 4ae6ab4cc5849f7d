package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
)

// sshRankScript reports what a rank sees, then waits for the file $STOP.
const sshRankScript = `echo "rank=$GOROVOD_RANK"
echo "secret=$(printf %s "$GOROVOD_SECRET" | sha256sum | cut -d' ' -f1)"
echo "pwd=$(pwd -P)"
echo "tmpdir=${TMPDIR-unset} display=${DISPLAY-unset} setbyx=$SET_BY_X"
printf 'tricky=%s|\n' "$TRICKY"
printf 'args=%s|%s\n' "$1" "$2"
echo ready
while [ ! -e "$STOP" ]; do sleep 0.05; done`

func TestSSHSpawnRank(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		secret := hex.EncodeToString([]byte(strings.Repeat("k", auth.SecretSize)))
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		stop := filepath.Join(dir, "stop")
		tricky := `a 'b' "c" $d \e ` + "`f`\n" + `g`
		environ := []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=/launcher/tmp", "DISPLAY=:99", "TRICKY=" + tricky}
		tg.cfg.ForwardEnv = []string{"DISPLAY", "SET_BY_X=x y"}
		c := sshShCommand(sshRankScript, "arg one", "it's")
		c.Dir = dir
		c.Env = []string{"GOROVOD_RANK=5", "GOROVOD_SECRET=" + secret, "STOP=" + stop}
		r := spawnSSH(t, tg, c, environ)
		r.stdout.waitFor(t, "ready")
		checkNoSecretInArgv(t, secret)
		if err := os.WriteFile(stop, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		sum := sha256.Sum256([]byte(secret))
		for _, want := range []string{
			"rank=5\n",
			"secret=" + hex.EncodeToString(sum[:]) + "\n",
			"pwd=" + dir + "\n",
			"tmpdir=unset display=:99 setbyx=x y\n",
			"tricky=" + tricky + "|\n",
			"args=arg one|it's\n",
		} {
			if !strings.Contains(r.stdout.String(), want) {
				t.Errorf("no %q in the rank's output:\n%s", want, r.stdout)
			}
		}
	})
}

// checkNoSecretInArgv fails t if any process's command line holds secret;
// the remote wrapper, on this same machine, must be among those read.
func checkNoSecretInArgv(t *testing.T, secret string) {
	t.Helper()
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	sawWrapper := false
	for _, path := range cmdlines {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("the secret is on the command line of %s: %q", path, b)
		}
		sawWrapper = sawWrapper || strings.Contains(string(b), sshWrapperName)
	}
	if !sawWrapper {
		t.Errorf("no process runs the remote wrapper %q: the check saw nothing", sshWrapperName)
	}
}

func TestSSHExitStatus(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		r := spawnSSH(t, tg, sshShCommand(`echo "to stderr" >&2; exit 3`), nil)
		xe := sshAsExitError(t, r.waitExit(t, 10*time.Second))
		if xe.Status != 3 || xe.Signal != "" || xe.Rank != 5 || xe.Host != tg.host {
			t.Errorf("ExitError = %+v, want status 3 of rank 5 on %s", *xe, tg.host)
		}
		var se *SSHError
		if errors.As(xe, &se) {
			t.Errorf("status 3 reported as an ssh failure: %v", se)
		}
		if r.stderr.String() != "to stderr\n" {
			t.Errorf("stderr = %q, want %q", r.stderr, "to stderr\n")
		}
	})
}

func TestSSHDirFallbackAndNoSecret(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		c := sshShCommand(`echo "secret=${GOROVOD_SECRET-unset} pwd=$PWD"`)
		c.Dir = "/nonexistent/gorovod dir"
		r := spawnSSH(t, tg, c, nil)
		if err := r.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if !strings.Contains(r.stderr.String(), "gorovod: warning: cannot change to directory /nonexistent/gorovod dir") {
			t.Errorf("no warning about the directory; stderr:\n%s", r.stderr)
		}
		if !strings.HasPrefix(r.stdout.String(), "secret=unset pwd=/") {
			t.Errorf("stdout = %q, want no secret and some directory", r.stdout)
		}
	})
}

// sshSleeper writes its pid to $1 and sleeps.
const sshSleeper = `echo $$ > "$1"; exec sleep 60`

func TestSSHKill(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		r := spawnSSH(t, tg, sshShCommand(sshSleeper, pidFile), nil)
		pid := sshReadPID(t, pidFile)
		if err := r.p.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		xe := sshAsExitError(t, r.waitExit(t, 10*time.Second))
		if xe.Signal != "SIGKILL" || xe.Status != -1 {
			t.Errorf("ExitError = %+v, want killed by SIGKILL", *xe)
		}
		sshWaitGone(t, "remote program", pid, 10*time.Second)
		if err := r.p.Kill(); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Kill after exit = %v, want os.ErrProcessDone", err)
		}
		if err := r.p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Signal after exit = %v, want os.ErrProcessDone", err)
		}
	})
}

func TestSSHSignalTerm(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		r := spawnSSH(t, tg, sshShCommand(`trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.1; done`), nil)
		r.stdout.waitFor(t, "ready")
		if err := r.p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("Signal: %v", err)
		}
		if err := r.waitExit(t, 10*time.Second); err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if !strings.Contains(r.stdout.String(), "got TERM\n") {
			t.Errorf("the program did not see SIGTERM; stdout:\n%s", r.stdout)
		}
	})
}

func TestSSHSignalForward(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		script := `trap 'echo got INT' INT; trap 'echo got USR1' USR1; echo ready; while :; do sleep 0.1; done`
		r := spawnSSH(t, tg, sshShCommand(script), nil)
		r.stdout.waitFor(t, "ready")
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGUSR1} {
			if err := r.p.Signal(sig); err != nil {
				t.Fatalf("Signal(%v): %v", sig, err)
			}
			r.stdout.waitFor(t, "got "+strings.TrimPrefix(signalName(sig), "SIG"))
		}
		if err := r.p.Signal(syscall.SIGWINCH); err == nil {
			t.Error("Signal(SIGWINCH): no error, want one (it cannot be forwarded)")
		}
		if err := r.p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("Signal(SIGTERM): %v", err)
		}
		xe := sshAsExitError(t, r.waitExit(t, 10*time.Second))
		if xe.Signal != "SIGTERM" {
			t.Errorf("ExitError = %+v, want killed by SIGTERM", *xe)
		}
	})
}

func TestSSHGraceKill(t *testing.T) {
	forEachSSHTarget(t, func(t *testing.T, tg sshTarget) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The rank's PATH finds no sleep: the wrapper must use its own.
		script := `PATH=/usr/bin:/bin; trap '' TERM; echo $$ > "$1"; while :; do sleep 0.1; done`
		r := spawnSSH(t, tg, sshShCommand(script, pidFile), []string{"PATH=/nonexistent"})
		pid := sshReadPID(t, pidFile)
		start := time.Now()
		if err := r.p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("Signal: %v", err)
		}
		xe := sshAsExitError(t, r.waitExit(t, 10*time.Second))
		if xe.Signal != "SIGKILL" {
			t.Errorf("ExitError = %+v, want killed by SIGKILL", *xe)
		}
		if d := time.Since(start); d < sshTestGrace {
			t.Errorf("killed after %v, before the grace period of %v", d, sshTestGrace)
		}
		sshWaitGone(t, "remote program", pid, 10*time.Second)
	})
}

// TestSSHClientKilled kills the ssh client behind the Process's back, as
// when gorun is SIGKILLed: sshd sees the connection end and the wrapper
// stops the program.
func TestSSHClientKilled(t *testing.T) {
	t.Parallel()
	tg := sshdTarget(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := spawnSSH(t, tg, sshShCommand(sshSleeper, pidFile), nil)
	pid := sshReadPID(t, pidFile)
	if err := syscall.Kill(r.p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sshWaitGone(t, "remote program", pid, 10*time.Second)
}

func TestSSHUnreachable(t *testing.T) {
	t.Parallel()
	tg := sshdTarget(t)
	tg.host = "127.0.0.3" // nothing listens there
	r := spawnSSH(t, tg, sshShCommand("true"), nil)
	err := r.waitExit(t, 10*time.Second)
	var se *SSHError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want an *SSHError", err, err)
	}
	if se.Rank != 5 || se.Host != "127.0.0.3" || !strings.Contains(se.Stderr, "Connection refused") {
		t.Errorf("SSHError = %+v, want rank 5 on 127.0.0.3 with ssh's message", *se)
	}
	if xe := sshAsExitError(t, err); xe.Status != 255 {
		t.Errorf("status %d, want 255", xe.Status)
	}
	want := fmt.Sprintf("runner: rank 5 on 127.0.0.3: ssh failed: ssh: connect to host 127.0.0.3 port %d: Connection refused", tg.cfg.Port)
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestCheckHosts(t *testing.T) {
	t.Parallel()
	tg := sshdTarget(t)
	if err := CheckHosts(t.Context(), tg.cfg, []string{tg.host, tg.host}); err != nil {
		t.Errorf("CheckHosts(good host): %v", err)
	}
	start := time.Now()
	err := NewSSHSpawner(tg.cfg).(HostChecker).CheckHosts(t.Context(), []string{tg.host, "127.0.0.3", "127.0.0.4"})
	t.Logf("CheckHosts took %v", time.Since(start))
	var ce *SSHCheckError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want an *SSHCheckError", err, err)
	}
	want := fmt.Sprintf("runner: cannot reach 2 hosts over ssh:\n"+
		"  127.0.0.3: ssh: connect to host 127.0.0.3 port %[1]d: Connection refused\n"+
		"  127.0.0.4: ssh: connect to host 127.0.0.4 port %[1]d: Connection refused", tg.cfg.Port)
	if err.Error() != want {
		t.Errorf("err =\n%s\nwant\n%s", err, want)
	}
}

// TestSSHLauncherKilled SIGKILLs a launcher that started a rank over ssh:
// its ssh client dies with it (parent-death signal), and the remote program
// within the grace period.
func TestSSHLauncherKilled(t *testing.T) {
	t.Parallel()
	tg := sshdTarget(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	launcher := filepath.Join(dir, sshLauncherName)
	if err := os.Symlink(self, launcher); err != nil {
		t.Fatal(err)
	}
	job, err := json.Marshal(sshLauncherJob{Config: tg.cfg, Host: tg.host, PIDFile: filepath.Join(dir, "pid")})
	if err != nil {
		t.Fatal(err)
	}
	out := &sshTestOutput{}
	cmd := exec.Command(launcher, string(job))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	remote := sshReadPID(t, filepath.Join(dir, "pid"))
	out.waitFor(t, "ssh-pid=")
	var client int
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "ssh-pid="):], "ssh-pid=%d", &client); err != nil {
		t.Fatalf("launcher output %q: %v", out, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	sshWaitGone(t, "local ssh client", client, 2*time.Second)
	sshWaitGone(t, "remote program", remote, 10*time.Second)
}

// TestSSHSpawnContextEndsDuringEnv gives Spawn an environment larger than
// a pipe holds and an ssh client that never reads it: when the context
// ends, Spawn kills the client and returns the context's error.
func TestSSHSpawnContextEndsDuringEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stuck := filepath.Join(dir, "stuck-ssh")
	if err := os.WriteFile(stuck, []byte("#!/bin/sh\necho $$ > \""+dir+"/pid\"\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	sp := NewSSHSpawner(SSHConfig{SSHPath: stuck}).(*sshSpawner)
	sp.environ = func() []string { return []string{"BIG=" + strings.Repeat("x", 120<<10)} }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pid := make(chan int, 1)
	go func() { // "cancel-spawn": ends once the client runs, or after 10 s
		defer cancel()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			b, _ := os.ReadFile(filepath.Join(dir, "pid"))
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				time.Sleep(100 * time.Millisecond) // Spawn is blocked writing
				pid <- n
				return
			}
		}
		pid <- 0
	}()
	p, err := sp.Spawn(ctx, Slot{Host: "h", Rank: 2}, Command{Argv: []string{"true"}}, io.Discard, io.Discard)
	if err == nil {
		_ = p.Kill()
		_ = p.Wait()
		t.Fatal("Spawn: no error, want the context's")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "runner: rank 2 on h: sending its environment") {
		t.Errorf("err = %v, want rank 2's context cancelled while sending its environment", err)
	}
	n := <-pid
	if n == 0 {
		t.Fatal("the stuck ssh client never ran")
	}
	sshWaitGone(t, "stuck ssh client", n, time.Second)
}
