package tcptransport

import (
	"fmt"
	"runtime"
	"testing"
	"time"
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
		a := addrs(c.local, c.remote)
		spin, quick := autoSpin(sharingRanks(0, a, nil), sharingRanks(0, a, nil))
		if busy := spin > 0; busy != c.busy || (quick == quickLook) != c.quick || (quick != 0 && quick != quickLook) {
			t.Errorf("%d local and %d remote ranks on %d CPUs: spin %v quick %v, want busy %v quick %v", c.local, c.remote, cpus, spin, quick, c.busy, c.quick)
		}
	}
	if spin, _ := autoSpin(sharingRanks(0, []string{"no-port"}, nil), 1); spin != spinBudget && cpus > 1 {
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
	one := tuning{}.normalize(0, addrs(cpus), nil)
	if two := (tuning{}).normalize(0, append(addrs(cpus), "10.0.0.2:7000"), nil); two.tcpPoll() != 0 || two.quick != quickLook {
		t.Errorf("one processor per rank here, a rank on another host: TCP polls %v, want 0", two.tcpPoll())
	}
	if one.spin != 0 || one.quick != quickLook || one.tcpPoll() != tcpLook || one.nap != tcpNap {
		t.Errorf("%d ranks on %d CPUs: spin %v quick %v tcp %v nap %v, want 0, %v, %v, %v", cpus, cpus, one.spin, one.quick, one.tcpPoll(), one.nap, quickLook, tcpLook, tcpNap)
	}
	if two := (tuning{}).normalize(0, append(addrs(cpus), "10.0.0.2:7000"), nil); two.nap != 0 {
		t.Errorf("a rank on another host: TCP naps %v, want 0", two.nap)
	}
	if over := (tuning{}).normalize(0, addrs(cpus+1), nil); over.tcpPoll() != 0 || over.nap != 0 {
		t.Errorf("more ranks than CPUs: TCP polls %v and naps %v, want 0 and 0", over.tcpPoll(), over.nap)
	}
	if cpus > 1 {
		if spare := (tuning{}).normalize(0, addrs(cpus-1), nil); spare.tcpPoll() != spinBudget || spare.nap != 0 {
			t.Errorf("a spare CPU: TCP polls %v and naps %v, want %v and 0", spare.tcpPoll(), spare.nap, spinBudget)
		}
	}
	if never := (tuning{spin: -1}).normalize(0, addrs(cpus), nil); never.tcpPoll() != 0 || never.nap != 0 {
		t.Errorf("spin never: TCP polls %v and naps %v", never.tcpPoll(), never.nap)
	}
}

// TestAutoSpinMachines: ranks on hosts of their own by address that share
// one machine's processors count together; where they outnumber the
// processors no wait polls, and where machines differ, are unknown, or
// this rank's is unknown, the addresses decide as before.
func TestAutoSpinMachines(t *testing.T) {
	cpus := runtime.NumCPU()
	// hosts returns n ranks, each on a host of its own, and their
	// machines: "m" for the first same of them, a machine of its own for
	// each other one.
	hosts := func(n, same int) (addrs, machines []string) {
		for i := range n {
			addrs = append(addrs, fmt.Sprintf("10.0.%d.%d:7000", i/250, i%250+1))
			m := "m"
			if i >= same {
				m = fmt.Sprint("own", i)
			}
			machines = append(machines, m)
		}
		return addrs, machines
	}
	alone := spinBudget // one rank on its host: a processor to spare, or one each
	if cpus == 1 {
		alone = 0
	}
	over, overM := hosts(cpus+1, cpus+1)
	fits, fitsM := hosts(cpus+1, cpus)
	cases := []struct {
		name     string
		addrs    []string
		machines []string
		spin     time.Duration
		quick    time.Duration
	}{
		{"more ranks than processors on one machine", over, overM, 0, 0},
		{"as many as processors on it, one more elsewhere", fits, fitsM, alone, quickIf(cpus == 1)},
		{"machines unknown", over, nil, alone, quickIf(cpus == 1)},
		{"every machine different", over, distinct(len(over)), alone, quickIf(cpus == 1)},
		{"this rank's machine unknown", over, append([]string{""}, overM[1:]...), alone, quickIf(cpus == 1)},
	}
	for _, c := range cases {
		spin, quick := autoSpin(sharingRanks(0, c.addrs, nil), sharingRanks(0, c.addrs, c.machines))
		if spin != c.spin || quick != c.quick {
			t.Errorf("%s (%d CPUs): spin %v quick %v, want %v and %v", c.name, cpus, spin, quick, c.spin, c.quick)
		}
	}
	// A Config's Machines reach the rank's tuning: no TCP poll, no quick
	// look, and raw calls where it has only TCP links.
	tun := tuning{}.normalize(0, over, overM)
	if tun.tcpPoll() != 0 || tun.quick != 0 || !tun.parksOnly(true) {
		t.Errorf("%d ranks on a %d-CPU machine: TCP polls %v, quick %v, parks only %v", len(over), cpus, tun.tcpPoll(), tun.quick, tun.parksOnly(true))
	}
}

func quickIf(b bool) time.Duration {
	if b {
		return quickLook
	}
	return 0
}

func distinct(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("machine", i)
	}
	return out
}
