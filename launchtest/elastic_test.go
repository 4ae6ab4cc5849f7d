package launchtest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
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
