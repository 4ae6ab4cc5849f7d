package tcptransport

import (
	"fmt"
	"runtime"
	"testing"
)

func TestAutoSpin(t *testing.T) {
	cpus := runtime.NumCPU()
	// addrs returns local ranks on 10.0.0.1 followed by remote ones.
	addrs := func(local, remote int) []string {
		var out []string
		for i := range local {
			out = append(out, fmt.Sprintf("10.0.0.1:%d", 7000+i))
		}
		for i := range remote {
			out = append(out, fmt.Sprintf("10.0.0.2:%d", 7000+i))
		}
		return out
	}
	cases := []struct {
		local, remote int
		busy, quick   bool
	}{
		{cpus - 1, 0, cpus > 1, false},
		{cpus - 1, 3 * cpus, cpus > 1, false}, // ranks on other hosts do not count
		{cpus, 0, false, true},                // one processor each: none to spare
		{cpus + 1, 0, false, false},
	}
	for _, c := range cases {
		if c.local == 0 {
			continue
		}
		spin, quick := autoSpin(0, addrs(c.local, c.remote))
		if busy := spin > 0; busy != c.busy || (quick == quickLook) != c.quick || (quick != 0 && quick != quickLook) {
			t.Errorf("%d local and %d remote ranks on %d CPUs: spin %v quick %v, want busy %v quick %v", c.local, c.remote, cpus, spin, quick, c.busy, c.quick)
		}
	}
	if spin, _ := autoSpin(0, []string{"no-port"}); spin != spinBudget && cpus > 1 {
		t.Error("an address without a port is a host of its own")
	}
}
