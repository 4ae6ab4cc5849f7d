package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	crashrankOnce sync.Once
	crashrankBin  string
	crashrankErr  error
)

// crashrank builds testdata/crashrank, a rank that all-reduces in a loop
// until the rank it is told to fail fails (see its doc comment).
func crashrank(t *testing.T) string {
	t.Helper()
	crashrankOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(gorunBin), "crashrank")
		if out, err := exec.Command("go", "build", "-o", bin, "./testdata/crashrank").CombinedOutput(); err != nil {
			crashrankErr = fmt.Errorf("go build ./testdata/crashrank: %v\n%s", err, out)
			return
		}
		crashrankBin = bin
	})
	if gorunBin == "" {
		t.Skipf("no gorun binary: %v", buildErr)
	}
	if crashrankErr != nil {
		t.Fatal(crashrankErr)
	}
	return crashrankBin
}

// gorunLine is gorun's own line of stderr (the ranks' lines are prefixed).
func gorunLine(stderr string) string {
	var own []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "gorun: ") {
			own = append(own, strings.TrimSuffix(line, "\n"))
		}
	}
	return strings.Join(own, "\n")
}

// TestGorunNamesTheCrashedRank: rank 1 of 3 fails inside an all-reduce
// loop; ranks 0 and 2 then fail too, because it went away. gorun must
// name rank 1, every time, and exit with its status (1 for a death by a
// signal).
func TestGorunNamesTheCrashedRank(t *testing.T) {
	const runs = 10
	bin := crashrank(t)
	for _, tc := range []struct {
		mode string
		code int
		says string
	}{
		{"exit7", 7, "gorun: rank 1 on localhost exited with status 7"},
		{"panic", 2, "gorun: rank 1 on localhost exited with status 2"},
		{"segv", 1, "gorun: rank 1 on localhost was killed by SIGABRT"},
		{"sigkill", 1, "gorun: rank 1 on localhost was killed by SIGKILL"},
		{"error", 1, "gorun: rank 1 on localhost exited with status 1"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			for i := range runs {
				r := runGorun(t, "-np", "3", bin, "-mode", tc.mode)
				line := gorunLine(r.stderr)
				if r.code != tc.code || !strings.HasPrefix(line, tc.says) || strings.Contains(line, "\n") {
					t.Errorf("run %d of %d: exit %d, gorun said %q; want exit %d and %q\nstderr:\n%s",
						i+1, runs, r.code, line, tc.code, tc.says, r.stderr)
				}
			}
		})
	}
}

// TestGorunRankLeavesBeforeJoining: rank 1 of 2 exits 0 at once, without
// hvd.Init, while rank 0 waits for it in hvd.Init with a start timeout of a
// minute. gorun ends the job within seconds, naming rank 1, and fails.
func TestGorunRankLeavesBeforeJoining(t *testing.T) {
	bin := crashrank(t)
	r := runGorun(t, "-np", "2", "--start-timeout", "60s", bin, "-mode", "early")
	const want = "gorun: rank 1 on localhost exited with status 0 before joining the job"
	if line := gorunLine(r.stderr); r.code == 0 || !strings.HasPrefix(line, want) {
		t.Errorf("exit %d, gorun said %q; want a failure and %q\nstderr:\n%s", r.code, line, want, r.stderr)
	}
	if r.took > 10*time.Second {
		t.Errorf("gorun took %v, want the job to end at once (well within its 60s start timeout)", r.took)
	}
}
