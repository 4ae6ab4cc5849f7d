package launchtest

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testlab"
)

// TestElasticLab runs elastic jobs of 4 ranks on 2 emulated hosts (2
// each): a rank of the second host killed with SIGKILL mid-step; a job
// that starts on the first host and grows onto the second when the
// discovery script lists it; then the second host cut off (its link brought down, so that its ranks neither
// exit nor answer). Each time the job goes on with the others and
// finishes with every sample processed exactly once; the cut host's
// ranks are found by their missing heartbeats, and the host gets no new
// ranks.
func TestElasticLab(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2})
	gorunArgs := func() []string {
		return append(append([]string{bin(t, "gorun"), "--verbose", "-np", "4", "-H", lab.HostsFlag(2), "--min-np", "2"},
			lab.GorunArgs()...), bin(t, "elasticrank"))
	}
	host2 := lab.Hosts[1].Addr

	t.Run("killed", func(t *testing.T) {
		env := append(lab.GorunEnv(), "ELASTIC_DIE="+host2+"/3", "ELASTIC_DIE_STEP=20")
		r := run(t, command(context.Background(), env, gorunArgs()...))
		mustSucceed(t, "elastic job across hosts with a rank killed", r)
		if !strings.Contains(r.stdout, elasticSums) || !strings.Contains(r.stdout, "first step of a formation of 3 ranks") {
			t.Fatalf("the job did not finish on 3 ranks with every sample once:\n%s\n%s", r.stdout, r.stderr)
		}
		after := recovery(t, r.stdout, "3")
		if after > 5*time.Second {
			t.Fatalf("the survivors' first step came %v after the death, want within 5s", after)
		}
		t.Logf("from the rank's death to the survivors' first completed step: %v", after)
	})

	t.Run("mnist", func(t *testing.T) {
		args := append(append([]string{bin(t, "gorun"), "-np", "4", "-H", lab.HostsFlag(2), "--min-np", "2"}, lab.GorunArgs()...),
			bin(t, "mnist"), "-elastic", "-epochs", "3")
		whole := run(t, command(context.Background(), lab.GorunEnv(), args...))
		mustSucceed(t, "mnist -elastic on 2 hosts", whole)
		g := startGorun(t, lab.GorunEnv(), args...)
		g.waitFor(t, "epoch 2 [")
		killWorker(t, host2+"/3")
		stdout, stderr := g.finish(t)
		a, b := finalAccuracy.FindStringSubmatch(whole.stdout), finalAccuracy.FindStringSubmatch(stdout)
		if a == nil || b == nil || a[2] != "4" || b[2] != "3" {
			t.Fatalf("want 4 ranks to the end, then 3 after the kill:\n%s\n---\n%s\n%s", whole.stdout, stdout, stderr)
		}
		x, _ := strconv.ParseFloat(a[1], 64)
		y, _ := strconv.ParseFloat(b[1], 64)
		t.Logf("test accuracy %.2f%% uninterrupted, %.2f%% with a rank of %s killed", x, y, host2)
		if math.Abs(x-y) > 1 {
			t.Errorf("accuracy %.2f%% with a rank killed, %.2f%% without: more than 1 point apart", y, x)
		}
	})

	t.Run("discovered", func(t *testing.T) {
		host1 := lab.Hosts[0].Addr
		script, file := discoveryScript(t, host1+":2\n")
		argv := append(append([]string{bin(t, "gorun"), "--verbose", "-np", "4", "--min-np", "2", "--host-discovery-script", script},
			lab.GorunArgs()...), bin(t, "elasticrank"))
		g := startGorun(t, append(lab.GorunEnv(), "ELASTIC_STEP_MS=20"), argv...)
		g.waitFor(t, "first step of a formation of 2 ranks")
		if err := os.WriteFile(file, []byte(host1+":2\n"+host2+":2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, log := g.finish(t)
		if !strings.Contains(out, elasticSums) || !strings.Contains(out, "first step of a formation of 4 ranks") {
			t.Fatalf("the job did not finish on 4 ranks with every sample once:\n%s\n%s", out, log)
		}
		grown := "generation=2 size=4 hosts=" + host1 + ":2," + host2 + ":2"
		if !strings.Contains(log, "generation=1 size=2 hosts="+host1+":2") || !strings.Contains(log, grown) {
			t.Errorf("gorun's log does not show the job growing from 2 ranks on %s to 4 on both hosts:\n%s", host1, log)
		}
	})

	t.Run("cut", func(t *testing.T) {
		g := startGorun(t, append(lab.GorunEnv(), "ELASTIC_STEP_MS=20"), gorunArgs()...)
		g.waitFor(t, "first step of a formation of 4 ranks")
		if out, err := lab.Command(context.Background(), 1, "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
			t.Fatalf("cutting host2 off: %v: %s", err, out)
		}
		out, log := g.finish(t)
		if !strings.Contains(out, elasticSums) || !strings.Contains(out, "first step of a formation of 2 ranks") {
			t.Fatalf("the job did not finish on host1's 2 ranks with every sample once:\n%s\n%s", out, log)
		}
		for _, want := range []string{"on " + host2 + " sent no sign of life", "generation=2 size=2", "hosts_blacklisted_for=30s"} {
			if !strings.Contains(log, want) {
				t.Errorf("gorun's log lacks %q:\n%s", want, log)
			}
		}
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "sign of life") || strings.Contains(line, "formed anew") {
				t.Log(line)
			}
		}
	})
}
