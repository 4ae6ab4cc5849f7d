package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
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

// TestSweepCSV runs the sweep on 3 in-process ranks and checks the lines
// shared/peers/run_all.sh parses: one RESULT line per size with a correct
// check, then "# done".
func TestSweepCSV(t *testing.T) {
	const n = 3
	cfg := config{sizes: []int{4096, 100000}, dtype: kernels.F32, op: kernels.Sum, iters: 3, warmup: 1,
		budget: 0.01, warmBudget: 0.01, csv: true, label: "gorovod"}
	ts := memtransport.NewNetwork(n).Transports()
	var out bytes.Buffer
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Go(func() {
			c := collective.NewComm(ts[r], collective.Options{})
			defer c.Close()
			w := &bytes.Buffer{}
			if r == 0 {
				w = &out
			}
			errs[r] = sweep(context.Background(), c, cfg, w)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var results []string
	for _, l := range lines {
		if strings.HasPrefix(l, "RESULT,") {
			results = append(results, l)
		}
	}
	if len(results) != 2 || lines[len(lines)-1] != "# done" {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, l := range results {
		f := strings.Split(l, ",")
		if len(f) != 12 || f[1] != "gorovod" || f[2] != "3" || f[11] != "ok" {
			t.Fatalf("bad RESULT line %q", l)
		}
	}
}
