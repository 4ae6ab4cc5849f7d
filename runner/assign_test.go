package runner

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestAssign(t *testing.T) {
	type s = Slot
	tests := []struct {
		hosts string
		np    int
		want  []Slot
	}{
		{"a", 1, []Slot{{Host: "a", Rank: 0, LocalRank: 0, LocalSize: 1, CrossRank: 0, CrossSize: 1, Size: 1}}},
		{"a:2,b:2", 3, []Slot{
			s{"a", 0, 0, 2, 0, 2, 3},
			s{"a", 1, 1, 2, 0, 1, 3},
			s{"b", 2, 0, 1, 1, 2, 3},
		}},
		{"a:2,b:2", 4, []Slot{
			s{"a", 0, 0, 2, 0, 2, 4},
			s{"a", 1, 1, 2, 0, 2, 4},
			s{"b", 2, 0, 2, 1, 2, 4},
			s{"b", 3, 1, 2, 1, 2, 4},
		}},
		{"a:2,b:2", 2, []Slot{ // b is not used
			s{"a", 0, 0, 2, 0, 1, 2},
			s{"a", 1, 1, 2, 0, 1, 2},
		}},
		{"a:1,b:3", 4, []Slot{
			s{"a", 0, 0, 1, 0, 2, 4},
			s{"b", 1, 0, 3, 1, 2, 4},
			s{"b", 2, 1, 3, 0, 1, 4},
			s{"b", 3, 2, 3, 0, 1, 4},
		}},
		{"w0:1,w1:2", 3, []Slot{ // Horovod's heterogeneous example
			s{"w0", 0, 0, 1, 0, 2, 3},
			s{"w1", 1, 0, 2, 1, 2, 3},
			s{"w1", 2, 1, 2, 0, 1, 3},
		}},
		{"a:3,b:1,c:2", 5, []Slot{
			s{"a", 0, 0, 3, 0, 3, 5},
			s{"a", 1, 1, 3, 0, 1, 5}, // c's second slot is not used
			s{"a", 2, 2, 3, 0, 1, 5},
			s{"b", 3, 0, 1, 1, 3, 5},
			s{"c", 4, 0, 1, 2, 3, 5},
		}},
		{"a:1,b:1,c:1", 3, []Slot{
			s{"a", 0, 0, 1, 0, 3, 3},
			s{"b", 1, 0, 1, 1, 3, 3},
			s{"c", 2, 0, 1, 2, 3, 3},
		}},
	}
	for _, tt := range tests {
		hosts, err := ParseHosts(tt.hosts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Assign(hosts, tt.np)
		if err != nil {
			t.Errorf("Assign(%s, %d): %v", tt.hosts, tt.np, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Assign(%s, %d) =\n%v\nwant\n%v", tt.hosts, tt.np, got, tt.want)
		}
	}
}

func TestAssignErrors(t *testing.T) {
	tests := []struct {
		hosts []Host
		np    int
		is    error
		want  []string
	}{
		{[]Host{{"host1", 2}, {"host2", 2}}, 5, ErrSlots,
			[]string{"runner: ", "-np 5", "4 slots", "host1:2, host2:2"}},
		{[]Host{{"a", 1}}, 2, ErrSlots, []string{"-np 2", "1 slots", "a:1"}},
		{nil, 1, ErrNoHosts, []string{"runner: no hosts"}},
		{[]Host{{"a", 1}}, 0, ErrNumProc, []string{"0 processes"}},
		{[]Host{{"a", 1}}, -3, ErrNumProc, []string{"-3 processes"}},
		{[]Host{{"a", 0}}, 1, ErrHosts, []string{`"a" has 0 slots`}},
		{[]Host{{"a", -1}, {"b", 4}}, 1, ErrHosts, []string{`"a" has -1 slots`}},
		{[]Host{{"", 1}}, 1, ErrHosts, []string{"empty host name"}},
		{[]Host{{"a", 1}, {"A", 1}}, 1, ErrHosts, []string{`duplicate host "A"`}},
	}
	for _, tt := range tests {
		_, err := Assign(tt.hosts, tt.np)
		if !errors.Is(err, tt.is) {
			t.Errorf("Assign(%v, %d) = %v, want %v", tt.hosts, tt.np, err, tt.is)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Assign(%v, %d) error %q does not contain %q", tt.hosts, tt.np, err, w)
			}
		}
	}
}

func TestAssignErrorListsFewHosts(t *testing.T) {
	var hosts []Host
	for i := range 20 {
		hosts = append(hosts, Host{fmt.Sprintf("h%d", i), 1})
	}
	_, err := Assign(hosts, 21)
	if err == nil || !strings.Contains(err.Error(), "-np 21 exceeds the 20 slots") ||
		!strings.Contains(err.Error(), "... 12 more") || strings.Contains(err.Error(), "h8:") {
		t.Fatalf("got %v", err)
	}
}

// TestAssignProperties checks the assignment rules on every small layout.
func TestAssignProperties(t *testing.T) {
	for _, counts := range slotLayouts(4, 4) {
		hosts := make([]Host, len(counts))
		for i, n := range counts {
			hosts[i] = Host{fmt.Sprintf("h%d", i), n}
		}
		for np := 1; np <= TotalSlots(hosts); np++ {
			slots, err := Assign(hosts, np)
			if err != nil {
				t.Fatalf("Assign(%v, %d): %v", hosts, np, err)
			}
			checkAssignment(t, hosts, np, slots)
		}
	}
}

// slotLayouts returns every list of 1..maxHosts slot counts in 1..maxSlots.
func slotLayouts(maxHosts, maxSlots int) [][]int {
	var out [][]int
	var rec func(prefix []int)
	rec = func(prefix []int) {
		if len(prefix) > 0 {
			out = append(out, append([]int(nil), prefix...))
		}
		if len(prefix) == maxHosts {
			return
		}
		for n := 1; n <= maxSlots; n++ {
			rec(append(prefix, n))
		}
	}
	rec(nil)
	return out
}

// checkAssignment verifies slots against the rules, computed independently.
func checkAssignment(t *testing.T, hosts []Host, np int, slots []Slot) {
	t.Helper()
	if len(slots) != np {
		t.Fatalf("Assign(%v, %d): %d slots", hosts, np, len(slots))
	}
	used := UsedHosts(slots)
	for i, h := range used {
		if h.Name != hosts[i].Name || h.Slots > hosts[i].Slots || (i < len(used)-1 && h.Slots != hosts[i].Slots) {
			t.Fatalf("Assign(%v, %d): used hosts %v do not fill in order", hosts, np, used)
		}
	}
	for r, s := range slots {
		local := used[indexOfHost(used, s.Host)].Slots
		var crossRank, crossSize int
		for _, h := range used {
			if h.Slots > s.LocalRank {
				if h.Name == s.Host {
					crossRank = crossSize
				}
				crossSize++
			}
		}
		if s.Rank != r || s.Size != np || s.LocalSize != local || s.LocalRank >= local ||
			s.CrossRank != crossRank || s.CrossSize != crossSize {
			t.Fatalf("Assign(%v, %d): rank %d = %+v (want local size %d, cross %d/%d)",
				hosts, np, r, s, local, crossRank, crossSize)
		}
		if r > 0 && slots[r-1].Host == s.Host && slots[r-1].LocalRank != s.LocalRank-1 {
			t.Fatalf("Assign(%v, %d): local ranks not consecutive at rank %d", hosts, np, r)
		}
	}
}

func indexOfHost(hosts []Host, name string) int {
	for i, h := range hosts {
		if h.Name == name {
			return i
		}
	}
	return -1
}

func TestUsedHosts(t *testing.T) {
	hosts := []Host{{"a", 2}, {"b", 3}, {"c", 4}}
	slots, err := Assign(hosts, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{"a", 2}, {"b", 2}}
	if got := UsedHosts(slots); !reflect.DeepEqual(got, want) {
		t.Fatalf("UsedHosts = %v, want %v", got, want)
	}
	if got := UsedHosts(nil); len(got) != 0 {
		t.Fatalf("UsedHosts(nil) = %v", got)
	}
}
