package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/jobenv"
)

// slurmEnv is getenv over the "NAME=value" entries kv.
func slurmEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// TestSlotsOfMatchesAssign: the slots a launcher that tells no local ranks
// derives from the hosts (jobenv.SlotsOf) are the ones Assign gives.
func TestSlotsOfMatchesAssign(t *testing.T) {
	for _, hosts := range [][]Host{
		{{"a", 2}, {"b", 2}}, {{"a", 3}, {"b", 1}, {"c", 2}}, {{"a", 1}}, {{"a", 1}, {"b", 4}},
	} {
		slots, err := Assign(hosts, TotalSlots(hosts))
		if err != nil {
			t.Fatal(err)
		}
		hostOf := make([]string, len(slots))
		for i, s := range slots {
			hostOf[i] = s.Host
		}
		if got := slotsOf(hostOf); !slices.Equal(got, slots) {
			t.Errorf("jobenv.SlotsOf(%v) = %v, want %v", hostOf, got, slots)
		}
	}
	// Ranks dealt round-robin over two hosts.
	got := slotsOf([]string{"a", "b", "a", "b", "a"})
	want := []Slot{{"a", 0, 0, 3, 0, 2, 5}, {"b", 1, 0, 2, 1, 2, 5}, {"a", 2, 1, 3, 0, 2, 5}, {"b", 3, 1, 2, 1, 2, 5}, {"a", 4, 2, 3, 0, 1, 5}}
	if !slices.Equal(got, want) {
		t.Errorf("cyclic: %v, want %v", got, want)
	}
}

func TestSlurmAllocation(t *testing.T) {
	hosts, ok, err := SlurmAllocation(slurmEnv("SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-3]", "SLURM_JOB_CPUS_PER_NODE=2(x2),4"))
	if err != nil || !ok || FormatHosts(hosts) != "n1:2,n2:2,n3:4" {
		t.Errorf("CPUs per node: %v %v %v", hosts, ok, err)
	}
	hosts, ok, err = SlurmAllocation(slurmEnv("SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=1(x2)",
		"SLURM_JOB_CPUS_PER_NODE=2(x2)"))
	if err != nil || !ok || FormatHosts(hosts) != "n1:1,n2:1" {
		t.Errorf("tasks per node: %v %v %v", hosts, ok, err)
	}
	if _, ok, err := SlurmAllocation(slurmEnv()); ok || err != nil {
		t.Errorf("outside an allocation: %v %v", ok, err)
	}
	_, _, err = SlurmAllocation(slurmEnv("SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_JOB_CPUS_PER_NODE=2"))
	if !errors.Is(err, jobenv.ErrLauncher) || !strings.Contains(err.Error(), "2 nodes but 1 counts") {
		t.Errorf("mismatch: %v", err)
	}
}

// slotsOf is jobenv.SlotsOf in runner's Slot type.
func slotsOf(hostOf []string) []Slot {
	var slots []Slot
	for _, s := range jobenv.SlotsOf(hostOf) {
		slots = append(slots, Slot(s))
	}
	return slots
}
