package launchtest

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// psPlaces returns the places that the tasks of psjoin printed, by role
// and index ("ps 1": "4 node2", its rank and host), and checks that every task found the same chief and
// server addresses.
func psPlaces(t *testing.T, out string) map[string]string {
	t.Helper()
	line := regexp.MustCompile(`role=(\w+) index=(\d+) rank=(\d+) host=(\S+) workers=\d+ servers=\d+ chief=(\S+) ps=(\S+)`)
	places := map[string]string{}
	var addrs string
	for _, m := range line.FindAllStringSubmatch(out, -1) {
		places[m[1]+" "+m[2]] = m[3] + " " + m[4]
		if addrs == "" {
			addrs = m[5] + " " + m[6]
		} else if m[5]+" "+m[6] != addrs {
			t.Errorf("%s %s found chief and servers %s %s; another task %s", m[1], m[2], m[5], m[6], addrs)
		}
	}
	return places
}

// TestGorunPS: gorun --ps 2 -np 2 --evaluator starts a chief, two workers,
// two servers and an evaluator of one program; the tasks find each other
// through ps.Join and reach every address they were given, the evaluator
// is stopped by SIGTERM after --evaluator-timeout and exits 0, and gorun
// succeeds.
func TestGorunPS(t *testing.T) {
	r := run(t, command(context.Background(), nil, bin(t, "gorun"), "--ps", "2", "-np", "2",
		"--evaluator", "--evaluator-timeout", "1s", bin(t, "psjoin")))
	mustSucceed(t, "gorun --ps 2 -np 2 --evaluator psjoin", r)
	places := psPlaces(t, r.stdout)
	want := map[string]string{"chief 0": "0 localhost", "worker 0": "1 localhost", "worker 1": "2 localhost",
		"ps 0": "3 localhost", "ps 1": "4 localhost"}
	for task, rank := range want {
		if places[task] != rank {
			t.Errorf("%s has rank %q, want %s\n%s", task, places[task], rank, r.stdout)
		}
	}
	for _, s := range []string{"[0]<stdout>: heard from worker 1", "[4]<stdout>: heard from chief 0",
		"[evaluator]<stdout>: role=evaluator host=localhost secret=32 bytes", "[evaluator]<stdout>: evaluator stopped by SIGTERM"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("no %q in:\n%s", s, r.stdout)
		}
	}
}
