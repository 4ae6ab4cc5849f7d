package launchtest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/testlab"
)

// labRankLine is testdata/labrank's line, after gorun's "[R]<stdout>: ".
var labRankLine = regexp.MustCompile(`\[(\d+)\]<stdout>: rank=(\d+) size=(\d+) local_rank=(\d+) local_size=(\d+) cross_rank=(\d+) cross_size=(\d+) host=(\S+) sum=(\d+) vector=(\S+)`)

// gorunPrefix is what gorun puts before each line of a rank's output.
var gorunPrefix = regexp.MustCompile(`(?m)^\[\d+\]<std(out|err)>: `)

// TestLab runs gorun across two emulated hosts of a lab (network
// namespaces with their own addresses and sshds, links limited to 2 Gbit/s
// each way): gorun in the root namespace binds the bridge's address and
// starts two ranks on each host over ssh, which all-reduce across the
// links.
func TestLab(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2, Rate: "2gbit"})
	gorun := func(t *testing.T, args ...string) result {
		t.Helper()
		argv := append([]string{bin(t, "gorun"), "-np", "4", "-H", lab.HostsFlag(2)}, lab.GorunArgs()...)
		return run(t, command(context.Background(), lab.GorunEnv(), append(argv, args...)...))
	}

	t.Run("ranks", func(t *testing.T) {
		prog := filepath.Join(t.TempDir(), "labrank")
		if out, err := exec.Command("go", "build", "-o", prog, "./testdata/labrank").CombinedOutput(); err != nil {
			t.Fatalf("go build ./testdata/labrank: %v\n%s", err, out)
		}
		r := gorun(t, prog)
		mustSucceed(t, "gorun labrank", r)
		seen := map[int]bool{}
		for _, m := range labRankLine.FindAllStringSubmatch(r.stdout, -1) {
			num := func(i int) int { n, _ := strconv.Atoi(m[i]); return n }
			prefix, rank, size, local, localSize, cross, crossSize, sum := num(1), num(2), num(3), num(4), num(5), num(6), num(7), num(9)
			host, vector := m[8], m[10]
			got := fmt.Sprintf("rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d host=%s sum=%d vector=%s",
				rank, size, local, localSize, cross, crossSize, host, sum, vector)
			want := fmt.Sprintf("rank=%d size=4 local_rank=%d local_size=2 cross_rank=%d cross_size=2 host=%s sum=10 vector=4",
				prefix, prefix%2, prefix/2, lab.Hosts[prefix/2].Name)
			if got != want {
				t.Errorf("rank %d says\n  %s\nwant\n  %s", prefix, got, want)
			}
			seen[rank] = true
		}
		if len(seen) != 4 || strings.Count(r.stdout, "<stdout>: rank=") != 4 {
			t.Errorf("want one line from each of ranks 0-3, got:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})

	t.Run("allreduce_bench", func(t *testing.T) {
		r := gorun(t, append([]string{bin(t, "allreduce_bench")}, benchArgs...)...)
		mustSucceed(t, "gorun allreduce_bench", r)
		if !strings.Contains(r.stdout, "4 ranks") {
			t.Errorf("not 4 ranks:\n%s", r.stdout)
		}
		benchWrong(t, gorunPrefix.ReplaceAllString(r.stdout, ""))
	})
}

// TestLabHierarchical runs the two-level collectives across emulated hosts
// with --hierarchical-allreduce on and off: on 2 hosts of 2 ranks (rank 0
// then logs a two-level layout), and on 2 hosts of 2 and 1 ranks, where
// all-reduce and all-gather stay flat and broadcast follows the hosts.
// labrank checks every result; allreduce_bench checks sizes that make many
// pipelined blocks.
func TestLabHierarchical(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2, Rate: "2gbit"})
	prog := filepath.Join(t.TempDir(), "labrank")
	if out, err := exec.Command("go", "build", "-o", prog, "./testdata/labrank").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/labrank: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		hosts    string
		np       int
		mode     string
		twoLevel bool
	}{
		{lab.HostsFlag(2), 4, "on", true},
		{lab.HostsFlag(2), 4, "off", true},
		{lab.Hosts[0].Addr + ":2," + lab.Hosts[1].Addr + ":1", 3, "on", false},
	} {
		t.Run(fmt.Sprintf("np%d/%s", tt.np, tt.mode), func(t *testing.T) {
			argv := append([]string{bin(t, "gorun"), "-np", strconv.Itoa(tt.np), "-H", tt.hosts,
				"--hierarchical-allreduce", tt.mode, "--log-level", "debug"}, lab.GorunArgs()...)
			r := run(t, command(context.Background(), lab.GorunEnv(), append(argv[:len(argv):len(argv)], prog)...))
			mustSucceed(t, "gorun labrank", r)
			if n := strings.Count(r.stdout, "<stdout>: rank="); n != tt.np {
				t.Errorf("%d ranks reported, want %d:\n%s", n, tt.np, r.stdout)
			}
			want := fmt.Sprintf("two_level=%v hierarchical=%s", tt.twoLevel, tt.mode)
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("rank 0 did not log %q:\n%s\n%s", want, r.stdout, r.stderr)
			}
			if tt.np != 4 {
				return
			}
			bench := append(argv[:len(argv):len(argv)], bin(t, "allreduce_bench"), "-sizes", "4K,3M", "-budget", "0.05", "-warm-budget", "0.02")
			r = run(t, command(context.Background(), lab.GorunEnv(), bench...))
			mustSucceed(t, "gorun allreduce_bench", r)
			benchWrong(t, gorunPrefix.ReplaceAllString(r.stdout, ""))
		})
	}
}
