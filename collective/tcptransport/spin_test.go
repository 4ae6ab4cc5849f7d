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

// TestTCPPoll: TCP links poll for tcpLook where the host has exactly one
// processor per rank and the job no rank elsewhere, while shared-memory
// links keep their yielding poll (spin zero); elsewhere TCP polls as spin
// says, and a test's "never" stays never.
func TestTCPPoll(t *testing.T) {
	cpus := runtime.NumCPU()
	addrs := func(local int) []string {
		var out []string
		for i := range local {
			out = append(out, fmt.Sprintf("10.0.0.1:%d", 7000+i))
		}
		return out
	}
	one := tuning{}.normalize(0, addrs(cpus))
	if two := (tuning{}).normalize(0, append(addrs(cpus), "10.0.0.2:7000")); two.tcpPoll() != 0 || two.quick != quickLook {
		t.Errorf("one processor per rank here, a rank on another host: TCP polls %v, want 0", two.tcpPoll())
	}
	if one.spin != 0 || one.quick != quickLook || one.tcpPoll() != tcpLook {
		t.Errorf("%d ranks on %d CPUs: spin %v quick %v tcp %v, want 0, %v, %v", cpus, cpus, one.spin, one.quick, one.tcpPoll(), quickLook, tcpLook)
	}
	if over := (tuning{}).normalize(0, addrs(cpus+1)); over.tcpPoll() != 0 {
		t.Errorf("more ranks than CPUs: TCP polls %v, want 0", over.tcpPoll())
	}
	if cpus > 1 {
		if spare := (tuning{}).normalize(0, addrs(cpus-1)); spare.tcpPoll() != spinBudget {
			t.Errorf("a spare CPU: TCP polls %v, want %v", spare.tcpPoll(), spinBudget)
		}
	}
	if never := (tuning{spin: -1}).normalize(0, addrs(cpus)); never.tcpPoll() != 0 {
		t.Errorf("spin never: TCP polls %v", never.tcpPoll())
	}
}
