package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/hvd"
	"github.com/gorovod/gorovod/hvd/hvdtest"
	"github.com/gorovod/gorovod/kernels"
)

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("4096, 64K,1M,2G")
	if err != nil || len(got) != 4 || got[0] != 4096 || got[1] != 64<<10 || got[2] != 1<<20 || got[3] != 2<<30 {
		t.Fatalf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "-4", "4Q", "0"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// TestSweepCSV runs the benchmark on 3 in-process ranks (hvd runtimes over
// an in-memory network, as hvd's tests build them), on the communicator
// and through the runtime's engine (-via hvd), and checks the lines
// peers/compare.sh parses: one RESULT line per size with a correct
// check, then "# done".
func TestSweepCSV(t *testing.T) {
	const n = 3
	for _, via := range []string{"comm", "hvd", "comm-parts"} {
		t.Run(via, func(t *testing.T) {
			cfg := config{sizes: []int{4096, 100000}, dtype: kernels.F32, op: kernels.Sum, iters: 3, warmup: 1,
				budget: 0.01, warmBudget: 0.01, csv: true, label: "gorovod", via: via}
			var out bytes.Buffer
			err := hvdtest.Run(n, func(rt *hvd.Runtime) error {
				w := &bytes.Buffer{}
				if rt.Rank() == 0 {
					w = &out
				}
				var j job = &commJob{c: rt.Comm()}
				switch via {
				case "hvd":
					j = &hvdJob{rt: rt}
				case "comm-parts":
					j = &commJob{c: rt.Comm(), parts: 7}
				}
				return sweep(context.Background(), j, cfg, w)
			})
			if err != nil {
				t.Fatal(err)
			}
			results := resultLines(t, out.String())
			if len(results) != 2 {
				t.Fatalf("output:\n%s", out.String())
			}
			for _, l := range results {
				f := strings.Split(l, ",")
				if len(f) != 12 || f[1] != "gorovod" || f[2] != "3" || f[11] != "ok" {
					t.Fatalf("bad RESULT line %q", l)
				}
			}
		})
	}
}

// TestRunWithoutLauncher: with no launcher's variables set the benchmark
// is one rank of size 1.
func TestRunWithoutLauncher(t *testing.T) {
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	args := []string{"-sizes", "4K", "-iters", "3", "-warmup", "1", "-budget", "0.01", "-warm-budget", "0.01", "-csv"}
	if err := run(args, noEnv, &out); err != nil {
		t.Fatal(err)
	}
	results := resultLines(t, out.String())
	if len(results) != 1 || !strings.HasPrefix(results[0], "RESULT,gorovod,1,4096,") || !strings.HasSuffix(results[0], ",ok") {
		t.Fatalf("output:\n%s", out.String())
	}
	if err := run([]string{"-via", "mpi"}, noEnv, &out); err == nil || !strings.Contains(err.Error(), `-via: "mpi" is neither comm nor hvd`) {
		t.Fatalf("-via mpi: %v", err)
	}
}

// resultLines returns the RESULT lines of a -csv report and checks that it
// ends with "# done".
func resultLines(t *testing.T, report string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(report), "\n")
	if lines[len(lines)-1] != "# done" {
		t.Fatalf("report does not end with # done:\n%s", report)
	}
	var results []string
	for _, l := range lines {
		if strings.HasPrefix(l, "RESULT,") {
			results = append(results, l)
		}
	}
	return results
}
