package launchtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// frozenWithin bounds how long gorun may take, from its start, to end a
// job one of whose ranks stops answering under a 2 s limit: generous for
// a loaded machine (the job itself ends about 3 s after the freeze).
const frozenWithin = 90 * time.Second

// endedWithin is how soon gorun must have ended: the job runs a few steps,
// the ranks wait 2s for the frozen one, and gorun names it at once.
const endedWithin = 30 * time.Second

// TestFrozenRankNamed: one rank of gorun -np 2 or 3 stops itself with
// SIGSTOP at step 3 (testdata/freezerank). The others wait for it until
// their op timeout (or stall shutdown time) of 2 s and fail; gorun ends
// the job, frozen rank included, and its summary names the frozen rank as
// not answering, reported by the others, and never a survivor; over shared
// memory and over TCP, with the steps negotiated by the engine or run on
// the runtime's communicator directly (via comm: Options.OpTimeout).
func TestFrozenRankNamed(t *testing.T) {
	for _, tc := range []struct {
		np, frozen int
		args       []string
		via        string
	}{
		{2, 1, []string{"--op-timeout", "2s"}, ""},
		{2, 1, []string{"--op-timeout", "2s", "--no-shared-memory"}, ""},
		{3, 1, []string{"--op-timeout", "2s"}, ""},
		{3, 1, []string{"--op-timeout", "2s", "--no-shared-memory"}, ""},
		{3, 2, []string{"--stall-check-time", "1s", "--stall-shutdown-time", "2s"}, ""},
		{3, 1, []string{"--op-timeout", "2s"}, "comm"},
		{4, 2, []string{"--op-timeout", "2s", "--no-shared-memory"}, "comm"},
	} {
		t.Run(fmt.Sprintf("np %d rank %d %s via %s", tc.np, tc.frozen, strings.Join(tc.args, " "), tc.via), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), frozenWithin)
			defer cancel()
			argv := append(append([]string{bin(t, "gorun"), "-np", fmt.Sprint(tc.np)}, tc.args...), bin(t, "freezerank"))
			env := []string{fmt.Sprintf("FREEZE_RANK=%d", tc.frozen), "FREEZE_STEP=3", "FREEZE_VIA=" + tc.via}
			start := time.Now()
			r := run(t, command(ctx, env, argv...))
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("gorun did not end within %v\nstdout:\n%s\nstderr:\n%s", frozenWithin, r.stdout, r.stderr)
			}
			// The ranks give up 2s after the freeze and gorun names the
			// rank at once: the job ends in seconds (2.6-4.8s measured),
			// far from the hang guard, with room for a loaded machine.
			if took > endedWithin {
				t.Errorf("gorun ended %v after its start, want within %v", took, endedWithin)
			}
			if r.code == 0 {
				t.Fatalf("gorun succeeded with a frozen rank\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			if want := fmt.Sprintf("rank %d stops itself at step 3", tc.frozen); !strings.Contains(r.stdout, want) {
				t.Fatalf("rank %d did not freeze (no %q)\nstdout:\n%s\nstderr:\n%s", tc.frozen, want, r.stdout, r.stderr)
			}
			sum := summary(r.stderr)
			want := []string{fmt.Sprintf("gorun: rank %d on localhost stopped answering (no answer within 2s, reported by ", tc.frozen), "killed it"}
			for _, w := range want {
				if !strings.Contains(sum, w) {
					t.Errorf("gorun's summary %q lacks %q\nstderr:\n%s", sum, w, r.stderr)
				}
			}
			for rank := range tc.np {
				if rank != tc.frozen && strings.Contains(sum, fmt.Sprintf("gorun: rank %d on", rank)) {
					t.Errorf("gorun's summary %q blames rank %d, a survivor", sum, rank)
				}
			}
			t.Logf("%s (gorun ended %v after its start)", sum, took.Round(time.Millisecond))
		})
	}
}

// summary returns gorun's last line of its own on standard error (not a
// rank's line, not a log record).
func summary(stderr string) string {
	var last string
	for l := range strings.Lines(stderr) {
		if strings.HasPrefix(l, "gorun: ") {
			last = strings.TrimSpace(l)
		}
	}
	return last
}
