package launchtest

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testlab"
)

// TestPSLab: gorun --ps 1 -np 2 across 2 emulated hosts (the chief, the
// server and worker 0 on the first, worker 1 on the second), and the
// second host's link cut mid-training, so that its worker neither exits
// nor answers: the chief drops that worker after its heartbeat timeout
// (mnist -heartbeat-timeout 3s), the others re-run its step, and the job
// finishes with every step done once and exit 0. The job is long enough
// (24 epochs, about 6 s alone on a quiet machine) that worker 0 cannot
// finish it before the chief has dropped worker 1: with 8 epochs it ran
// all 752 steps in 2 s, before the 3 s heartbeat timeout. gorun, which cannot
// reach the cut worker, warns that it is still running and ends within
// 20 s of the chief (its stop grace period twice, and a little).
func TestPSLab(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2})
	host1, host2 := lab.Hosts[0].Addr, lab.Hosts[1].Addr
	const epochs = 24
	argv := append(append([]string{bin(t, "gorun"), "--ps", "1", "-np", "2", "-H", host1 + ":2," + host2 + ":1"}, lab.GorunArgs()...),
		psMnist(t, "-epochs", strconv.Itoa(epochs), "-log-every", "5", "-heartbeat-timeout", "3s")...)
	g := startGorun(t, lab.GorunEnv(), argv...)
	g.waitFor(t, "epoch 1 [   10/94]")
	// Worker 1, started over ssh, may join the pool after the first steps.
	joined := regexp.MustCompile(`ps: worker joined the pool .*worker=1 remote=` + regexp.QuoteMeta(host2) + `:`)
	for !joined.MatchString(g.stderr.String()) {
		select {
		case err := <-g.done:
			t.Fatalf("gorun ended (%v) before worker 1 joined from %s:\n%s", err, host2, g.stderr.String())
		case <-g.deadline:
			t.Fatalf("worker 1 did not join from %s:\n%s", host2, g.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if out, err := lab.Command(context.Background(), 1, "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting %s off: %v: %s", host2, err, out)
	}
	g.waitFor(t, "final test accuracy")
	chiefDone := time.Now()
	out, log := g.finish(t)
	took := time.Since(chiefDone)
	t.Logf("gorun ended %v after the chief's last line", took.Round(time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("gorun ended %v after the chief, want within 20s", took)
	}
	if n := stepsDone(t, out); n != epochs*psStepsPerEpoch {
		t.Errorf("%d steps done, want %d\n%s", n, epochs*psStepsPerEpoch, out)
	}
	if m := psFinal.FindStringSubmatch(out); m == nil || m[3] != "1" {
		t.Errorf("the job did not end on 1 worker:\n%s", out)
	}
	if !regexp.MustCompile(`WARN ps: worker left the pool .*worker=1 why="silent for 3s"`).MatchString(log) {
		t.Errorf("the chief did not drop worker 1 for its silence:\n%s", log)
	}
	// The cut worker cannot hear the chief's stop, nor gorun's SIGTERM.
	if want := "gorun: worker 1 (rank 2) on " + host2 + " still running 3s after the chief ended; stopped"; !strings.Contains(log, want) {
		t.Errorf("gorun's log lacks %q:\n%s", want, log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "worker left the pool") || strings.Contains(line, "gorun: ") {
			t.Log(line)
		}
	}
}
