package launchtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// elasticSums is what testdata/elasticrank's final rank 0 prints when
// every sample of its 2 epochs of 600 was processed exactly once.
const elasticSums = "sums 360600 1.443602e+08 1200 after "

// runElastic runs gorun with args on elasticrank, the workers named in die
// killing themselves with SIGKILL after step 20.
func runElastic(t *testing.T, die string, args ...string) result {
	t.Helper()
	argv := append(append([]string{bin(t, "gorun")}, args...), bin(t, "elasticrank"))
	return run(t, command(context.Background(), []string{"ELASTIC_DIE=" + die, "ELASTIC_DIE_STEP=20"}, argv...))
}

var (
	diedAt    = regexp.MustCompile(`dying at (\d+)`)
	firstStep = regexp.MustCompile(`first step of a formation of (\d+) ranks at (\d+)`)
)

// TestElasticRankKilled: gorun -np 4 --min-np 2, and one rank kills itself
// with SIGKILL mid-epoch: the three others form the job anew, roll back
// to their last commit and finish it, every sample processed exactly once
// (the model's sums), the job succeeding. The survivors' first step comes
// within 5 s of the death (measured and logged).
func TestElasticRankKilled(t *testing.T) {
	r := runElastic(t, "localhost/2", "-np", "4", "--min-np", "2")
	mustSucceed(t, "elastic job with a rank killed", r)
	if !strings.Contains(r.stdout, elasticSums) {
		t.Fatalf("no line %q: the samples were not all processed exactly once\n%s", elasticSums, r.stdout)
	}
	if !strings.Contains(r.stderr, "rank 2 on localhost was killed by SIGKILL") || !strings.Contains(r.stderr, "left=3") {
		t.Errorf("gorun did not report the lost rank:\n%s", r.stderr)
	}
	m := diedAt.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("the rank did not die:\n%s", r.stdout)
	}
	died, _ := strconv.ParseInt(m[1], 10, 64)
	var after time.Duration = -1
	for _, f := range firstStep.FindAllStringSubmatch(r.stdout, -1) {
		at, _ := strconv.ParseInt(f[2], 10, 64)
		if f[1] == "3" && (after < 0 || time.Duration(at-died) < after) {
			after = time.Duration(at - died)
		}
	}
	if after < 0 || after > 5*time.Second {
		t.Fatalf("the survivors' first step came %v after the death, want within 5s\n%s", after, r.stdout)
	}
	t.Logf("from the rank's death to the survivors' first completed step: %v", after)
}

// TestElasticTwoLost: two ranks die at once; the other two go on, down to
// --min-np, and finish with every sample processed exactly once.
func TestElasticTwoLost(t *testing.T) {
	r := runElastic(t, "localhost/2,localhost/3", "-np", "4", "--min-np", "2")
	mustSucceed(t, "elastic job with two ranks killed", r)
	if !strings.Contains(r.stdout, elasticSums) {
		t.Fatalf("no line %q\n%s", elasticSums, r.stdout)
	}
}

// TestElasticLimits: losing a rank below --min-np, or more often than
// --reset-limit allows, stops the job with a message that says which.
func TestElasticLimits(t *testing.T) {
	for _, c := range []struct {
		die  string
		args []string
		want string
	}{
		{"localhost/1", []string{"-np", "2", "--min-np", "2"}, "gorun: rank 1 on localhost was killed by SIGKILL; 1 rank left, fewer than --min-np 2"},
		{"localhost/2,localhost/3", []string{"-np", "4", "--min-np", "1", "--reset-limit", "1"},
			"was killed by SIGKILL; the elastic job was formed anew 1 time already (--reset-limit 1)"},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			r := runElastic(t, c.die, c.args...)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, want a failure saying %q\nstderr:\n%s", r.code, c.want, r.stderr)
			}
		})
	}
}

// discoveryScript writes an executable that prints the file it returns
// (initially hosts), for the test to change while gorun runs.
func discoveryScript(t *testing.T, hosts string) (script, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "hosts")
	if err := os.WriteFile(file, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "discover")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat "+file+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, file
}

// TestElasticGrows: the discovery script lists 2 slots, then 4: the job
// of -np 4 starts with 2 ranks, grows to 4 at a commit (gorun logs the
// new generation's size), and finishes with every sample processed
// exactly once.
func TestElasticGrows(t *testing.T) {
	script, file := discoveryScript(t, "localhost:2\n")
	cmd := command(context.Background(), []string{"ELASTIC_STEP_MS=20"}, bin(t, "gorun"), "-np", "4", "--min-np", "2",
		"--host-discovery-script", script, bin(t, "elasticrank"))
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(runTimeout)
	for !strings.Contains(stdout.String(), "first step of a formation of 2 ranks") {
		select {
		case err := <-done:
			t.Fatalf("gorun ended (%v) before the job of 2 ranks trained\n%s\n%s", err, stdout.String(), stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("no job of 2 ranks")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.WriteFile(file, []byte("localhost:4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gorun: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
	case <-deadline:
		cmd.Process.Kill()
		t.Fatal("gorun did not end")
	}
	out, log := stdout.String(), stderr.String()
	if !strings.Contains(out, elasticSums) || !strings.Contains(out, "first step of a formation of 4 ranks") {
		t.Fatalf("the job did not finish at 4 ranks with every sample once:\n%s", out)
	}
	if !strings.Contains(log, "generation=1 size=2") || !strings.Contains(log, "generation=2 size=4") {
		t.Errorf("gorun's log does not show the size going 2 -> 4:\n%s", log)
	}
}

// TestElasticWaitsForHosts: with a discovery script, too few slots for
// --min-np fail the job after --elastic-timeout, at the start and after a
// loss (the host where a rank failed gets no new ranks), with a message
// naming what it waited for and what it saw.
func TestElasticWaitsForHosts(t *testing.T) {
	script, _ := discoveryScript(t, "localhost:1\n")
	r := runElastic(t, "", "-np", "2", "--min-np", "2", "--elastic-timeout", "1s", "--host-discovery-script", script)
	if want := "waited 1s for hosts enough for --min-np 2 ranks; the discovery script lists 1 slot (localhost:1)"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("start: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
	script, _ = discoveryScript(t, "localhost:2\n")
	r = runElastic(t, "localhost/1", "-np", "2", "--min-np", "2", "--elastic-timeout", "1s", "--host-discovery-script", script)
	if want := "waited 1s for hosts enough for --min-np 2 ranks, has 1; the discovery script's hosts: localhost:2 (a rank failed there; no new ranks for"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("after a loss: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("#!/bin/sh\necho 'node1:x'\n"), 0o755)
	r = runElastic(t, "", "-np", "2", "--host-discovery-script", bad)
	if want := `line 1 "node1:x": slot count "x" is not a positive integer`; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("garbage: exit %d, want a failure saying %q\n%s", r.code, want, r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
