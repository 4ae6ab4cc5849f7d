package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/hvd"
)

// TestSIGKILLedRankResumes is the resume guarantee end to end, with real
// processes: a 2-rank gorun job of this example is stopped by SIGKILL to
// rank 1 after its first checkpoint, gorun ends the job and says which
// rank died, and a -resume run from the same directory finishes with the
// same step count, parameters and optimizer state as a run that was never
// interrupted (bit for bit: with two ranks every sum is a single addition,
// so the result does not depend on how the ranks' messages interleave).
func TestSIGKILLedRankResumes(t *testing.T) {
	dir := t.TempDir()
	gorun := goBuild(t, "../../cmd/gorun", filepath.Join(dir, "gorun"))
	mnist := goBuild(t, ".", filepath.Join(dir, "mnist"))
	noData := t.TempDir() // no IDX files: the synthetic set
	job := func(ckpt string, extra ...string) *exec.Cmd {
		args := []string{"-np", "2", mnist, "-data", noData, "-synthetic-train", "6000", "-synthetic-test", "500",
			"-hidden", "64", "-epochs", "3", "-batch", "16", "-optimizer", "adam", "-lr", "0.001",
			"-checkpoint-every", "10", "-keep", "2", "-seed", "5", "-threads", "1", "-checkpoint-dir", ckpt}
		return exec.Command(gorun, append(args, extra...)...)
	}

	whole := filepath.Join(dir, "whole")
	if out, err := job(whole).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}
	want := newest(t, whole)

	killed := filepath.Join(dir, "killed")
	cmd := job(killed)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(ckptFiles(killed)) == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no checkpoint after a minute:\n%s", out.String())
		}
	}
	rank1 := descendantWithEnv(t, cmd.Process.Pid, "GOROVOD_RANK=1")
	if err := syscall.Kill(rank1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("gorun succeeded after its rank 1 was killed:\n%s", out.String())
	}
	if !regexp.MustCompile(`rank 1\b.*(killed|signal)`).MatchString(out.String()) {
		t.Errorf("gorun's output does not say that rank 1 was killed:\n%s", out.String())
	}
	t.Logf("gorun: %s", lastLine(out.String()))
	at := newest(t, killed)
	if at.Step >= want.Step {
		t.Fatalf("the killed run got to step %d, the whole run has %d: it was not stopped mid-training", at.Step, want.Step)
	}

	res, err := job(killed, "-resume").CombinedOutput()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, res)
	}
	m := regexp.MustCompile(`resumed from step (\d+)`).FindSubmatch(res)
	if m == nil {
		t.Fatalf("the resumed run did not say where it resumed:\n%s", res)
	}
	if from, _ := strconv.ParseInt(string(m[1]), 10, 64); from < at.Step || from == 0 {
		t.Errorf("resumed from step %d; the newest checkpoint after the kill was step %d", from, at.Step)
	}
	t.Logf("killed rank 1 after the checkpoint of step %d; resumed from step %s; %d steps in all", at.Step, m[1], want.Step)
	got := newest(t, killed)
	if got.Step != want.Step || got.Epoch != want.Epoch {
		t.Fatalf("resumed run ended at step %d (epoch %d), the whole run at %d (%d)", got.Step, got.Epoch, want.Step, want.Epoch)
	}
	if !reflect.DeepEqual(got.Params, want.Params) {
		t.Error("the resumed run's parameters differ from the uninterrupted run's")
	}
	if !reflect.DeepEqual(got.Optimizer, want.Optimizer) {
		t.Error("the resumed run's optimizer state differs from the uninterrupted run's")
	}
}

// goBuild builds the package in dir into out.
func goBuild(t *testing.T, dir, out string) string {
	t.Helper()
	if b, err := exec.Command("go", "build", "-o", out, dir).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	return out
}

// ckptFiles lists the finished checkpoint files in dir, oldest first.
func ckptFiles(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "checkpoint-*.ckpt"))
	slices.Sort(names)
	return names
}

// newest reads the newest checkpoint in dir.
func newest(t *testing.T, dir string) *hvd.Checkpoint {
	t.Helper()
	files := ckptFiles(dir)
	if len(files) == 0 {
		t.Fatalf("no checkpoint in %s", dir)
	}
	c, err := hvd.ReadCheckpoint(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// descendantWithEnv finds the process below pid whose environment holds
// the entry env.
func descendantWithEnv(t *testing.T, pid int, env string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a != pid {
				continue
			}
			environ, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "environ"))
			if slices.Contains(strings.Split(string(environ), "\x00"), env) {
				return p
			}
			break
		}
	}
	t.Fatalf("no process below %d has %s", pid, env)
	return 0
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
