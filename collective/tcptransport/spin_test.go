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
		want          bool
	}{
		{cpus - 1, 0, cpus > 1},
		{cpus - 1, 3 * cpus, cpus > 1}, // ranks on other hosts do not count
		{cpus, 0, false},               // no processor to spare
		{cpus + 1, 0, false},
	}
	for _, c := range cases {
		got := autoSpin(0, addrs(c.local, c.remote)) > 0
		if got != c.want {
			t.Errorf("%d local and %d remote ranks on %d CPUs: polling %v, want %v", c.local, c.remote, cpus, got, c.want)
		}
	}
	if autoSpin(0, []string{"no-port"}) != spinBudget {
		t.Error("an address without a port is a host of its own")
	}
}
