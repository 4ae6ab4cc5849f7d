package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestGorunEveryRankSpeaks(t *testing.T) {
	for _, np := range []int{1, 2, 4} {
		t.Run(strconv.Itoa(np), func(t *testing.T) {
			r := runGorun(t, "-np", strconv.Itoa(np), "sh", "-c", "echo hi from $GOROVOD_RANK")
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for rank := range np {
				if want := fmt.Sprintf("[%d]<stdout>: hi from %d\n", rank, rank); !strings.Contains(r.stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
				}
			}
			if n := strings.Count(r.stdout, "\n"); n != np {
				t.Errorf("stdout has %d lines, want %d:\n%s", n, np, r.stdout)
			}
		})
	}
}

func TestGorunHostname(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	r := runGorun(t, "-np", "2", "hostname")
	want := fmt.Sprintf("[0]<stdout>: %s\n[1]<stdout>: %s\n", host, host)
	if r.code != 0 || !sameLines(r.stdout, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
}

// sameLines reports whether a and b hold the same lines in any order.
func sameLines(a, b string) bool {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return false
	}
	count := map[string]int{}
	for _, l := range la {
		count[l]++
	}
	for _, l := range lb {
		count[l]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestGorunRankFailureStopsJob(t *testing.T) {
	dir := t.TempDir()
	script := `if [ "$GOROVOD_RANK" = 2 ]; then ` + waitChildren(dir, 3) + `; exit 3; fi; ` + pidScript(dir)
	start := time.Now()
	cmd, stdout, stderr := gorun(t, "-np", "4", "-H", "localhost:4", "sh", "-c", script)
	r := finish(t, cmd, stdout, stderr, start, 20*time.Second)
	if r.code != 3 {
		t.Errorf("exit %d, want 3 (the failed rank's status)", r.code)
	}
	if r.took > 5*time.Second {
		t.Errorf("gorun took %v to stop the job, want < 5s", r.took)
	}
	oneLine(t, r.stderr, "gorun: rank 2 on localhost exited with status 3", "stopped the other 3 ranks")
	checkGone(t, readPids(t, dir, 6), 2*time.Second)
}

func TestGorunSIGINTStopsAllRanks(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	cmd, stdout, stderr := gorun(t, "-np", "3", "sh", "-c", pidScript(dir))
	pids := readPids(t, dir, 6)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, stdout, stderr, start, 10*time.Second)
	if r.code != 130 {
		t.Errorf("exit %d, want 130", r.code)
	}
	oneLine(t, r.stderr, "gorun: interrupted", "stopped 3 running ranks")
	checkGone(t, pids, 2*time.Second)
}

func TestGorunSIGKILLLeavesNoRank(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	script := fmt.Sprintf(`echo $$ > %s/rank.$GOROVOD_RANK; exec sleep 60`, dir)
	cmd, stdout, stderr := gorun(t, "-np", "3", "sh", "-c", script)
	pids := readPids(t, dir, 3)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = finish(t, cmd, stdout, stderr, start, 10*time.Second)
	checkGone(t, pids, 10*time.Second)
}

func TestGorunTooManyRanks(t *testing.T) {
	r := runGorun(t, "-np", "5", "-H", "localhost:4", "true")
	if r.code != 2 {
		t.Errorf("exit %d, want 2", r.code)
	}
	oneLine(t, r.stderr, "-np 5", "4 slots")
}

func TestGorunBadHostfileLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte("# cluster\nlocalhost slots=2\nnode2 slots=two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runGorun(t, "-hostfile", path, "true")
	if r.code != 2 {
		t.Errorf("exit %d, want 2", r.code)
	}
	oneLine(t, r.stderr, "line 3", `"node2 slots=two"`)
}

func TestGorunOutputFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	r := runGorun(t, "-np", "2", "--output-filename", dir, "sh", "-c", `echo out $GOROVOD_RANK; printf "err" >&2`)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for rank := range 2 {
		for name, want := range map[string]string{"stdout": fmt.Sprintf("out %d\n", rank), "stderr": "err"} {
			got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%02d", rank), name))
			if err != nil || string(got) != want {
				t.Errorf("rank.%02d/%s = %q, %v; want %q", rank, name, got, err, want)
			}
		}
		if want := fmt.Sprintf("[%d]<stderr>: err\n", rank); !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.stderr)
		}
	}
}

func TestGorunHelp(t *testing.T) {
	r := runGorun(t, "--help")
	if r.code != 0 {
		t.Errorf("exit %d", r.code)
	}
	for _, want := range []string{"gorun [flags] program [args...]", "--np", "-H", "--hostfile", "--ssh-port", "-x",
		"--start-timeout", "--fusion-threshold-mb", "--version", "Exit status"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
