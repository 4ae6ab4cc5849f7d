package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gorunBin is the gorun binary that TestMain builds; "" if it could not.
var gorunBin string

// buildErr says why gorunBin is missing.
var buildErr error

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gorun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "gorun")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("go build: %v\n%s", err, out)
	} else {
		gorunBin = bin
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a gorun run left behind.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// gorun starts the gorun binary with args; wait with finish.
func gorun(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	if gorunBin == "" {
		t.Skipf("no gorun binary: %v", buildErr)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(gorunBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = t.TempDir()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

// finish waits up to limit for cmd, killing it after that.
func finish(t *testing.T, cmd *exec.Cmd, stdout, stderr *bytes.Buffer, start time.Time, limit time.Duration) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gorun %q did not finish within %v\nstdout:\n%s\nstderr:\n%s", cmd.Args[1:], limit, stdout, stderr)
	}
	r := result{code: 0, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// runGorun runs gorun with args to completion (at most 20 s).
func runGorun(t *testing.T, args ...string) result {
	t.Helper()
	start := time.Now()
	cmd, stdout, stderr := gorun(t, args...)
	return finish(t, cmd, stdout, stderr, start, 20*time.Second)
}

// pidScript is a rank that records its shell's pid and a child's pid in
// dir (each file appears whole), then runs until stopped: a rank with a
// process of its own.
func pidScript(dir string) string {
	return fmt.Sprintf(`cd %s; r=$GOROVOD_RANK; echo $$ > .sh.$r; mv .sh.$r sh.$r
		sleep 60 & echo $! > .child.$r; mv .child.$r child.$r; wait`, dir)
}

// waitChildren is a shell snippet that waits until n ranks of pidScript
// have recorded their pids in dir.
func waitChildren(dir string, n int) string {
	return fmt.Sprintf(`while [ "$(ls %s | grep -c child)" -lt %d ]; do sleep 0.01; done`, dir, n)
}

// readPids waits until dir holds n pid files and returns their pids.
func readPids(t *testing.T, dir string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pids []int
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("found %d of %d pid files in %s", len(pids), n, dir)
		}
		time.Sleep(20 * time.Millisecond)
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

// checkGone waits up to limit for every pid to be gone.
func checkGone(t *testing.T, pids []int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("process %d of the job still runs %v later", pid, limit)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// oneLine checks that s is exactly one line containing every part.
func oneLine(t *testing.T, s string, parts ...string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("stderr is not one line: %q", s)
	}
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("stderr %q lacks %q", s, p)
		}
	}
}

// TestVersionOf: the module version, then the commit, its time and a
// changed tree, as far as the build recorded them.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0166099a1b2c3d4e5f"}, {Key: "vcs.time", Value: "2026-11-24T10:49:01Z"}}
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "(devel)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.2.0"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "(devel) (commit 0166099a1b2c, 2026-11-24T10:49:01Z)"},
		{&debug.BuildInfo{Settings: append(vcs, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "(devel) (commit 0166099a1b2c, 2026-11-24T10:49:01Z, modified)"},
	} {
		if got := versionOf(c.info); got != c.want {
			t.Errorf("versionOf = %q, want %q", got, c.want)
		}
	}
}

// TestSuggestion: a mistyped flag gets the flag it was meant to be, a
// flag that resembles none gets no guess.
func TestSuggestion(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"-nq", "gorun: flag provided but not defined: -nq; did you mean -np? (see gorun --help)"},
		{"--verbos", "gorun: flag provided but not defined: -verbos; did you mean --verbose? (see gorun --help)"},
		{"--hostfiel", "gorun: flag provided but not defined: -hostfiel; did you mean --hostfile? (see gorun --help)"},
		{"--min-pn", "gorun: flag provided but not defined: -min-pn; did you mean --min-np? (see gorun --help)"},
		{"--frobnicate", "gorun: flag provided but not defined: -frobnicate (see gorun --help)"},
	} {
		var out bytes.Buffer
		code := run(context.Background(), []string{"gorun", c.arg, "3", "./train"}, &out, &out)
		if got := strings.TrimSpace(out.String()); code != 2 || got != c.want {
			t.Errorf("%s: exit %d, %q; want 2, %q", c.arg, code, got, c.want)
		}
	}
}

// TestBoolValueAsProgram: "--verbose false" does not run false(1); the
// message says how to write the value. A program named false without a
// boolean flag, and --verbose=false, are fine.
func TestBoolValueAsProgram(t *testing.T) {
	var out bytes.Buffer
	code := run(context.Background(), []string{"gorun", "-np", "1", "--verbose", "false", "./train"}, &out, &out)
	want := `gorun: the program would be "false": boolean flags such as --verbose take no separate value; write --verbose=false (or name the program by its path, ./false)`
	if got := strings.TrimSpace(out.String()); code != 2 || got != want {
		t.Errorf("exit %d, %q; want 2, %q", code, got, want)
	}
	if cfg, err := parse(t, "-np", "1", "--verbose=false", "./train"); err != nil || cfg.Verbose || cfg.Command[0] != "./train" {
		t.Errorf("--verbose=false: %+v, %v", cfg.Command, err)
	}
	if cfg, err := parse(t, "-np", "1", "false"); err != nil || cfg.Command[0] != "false" {
		t.Errorf("plain false: %v, %v", cfg.Command, err)
	}
}
