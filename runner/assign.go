package runner

import (
	"fmt"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// Slot is the place of one rank in the job: its host and the numbers that
// the worker sees in its environment (see jobenv.Env). It has the fields of
// jobenv.Slot, which jobenv.Env.ForSlot takes: convert with jobenv.Slot(s).
type Slot struct {
	Host      string // host name, as in Host.Name
	Rank      int    // global rank, 0..Size-1
	LocalRank int    // index of this rank among the ranks on its host
	LocalSize int    // number of ranks placed on this host
	CrossRank int    // position of the host among the hosts that have a rank with this LocalRank
	CrossSize int    // number of hosts that have a rank with this LocalRank
	Size      int    // total number of ranks (np)
}

// maxListedHosts bounds how many hosts an ErrSlots message lists.
const maxListedHosts = 8

// Assign places exactly np ranks on hosts, filling each host (in the order
// given) before the next, and returns one Slot per rank in rank order.
// LocalRank is the slot index on the host and LocalSize the number of ranks
// actually placed there; CrossRank is the host's position among the hosts
// that have a rank with the same LocalRank, and CrossSize their number.
// Hosts left without a rank are not used. It is an error for hosts to be
// empty, to hold a duplicate or a host without slots, for np to be ≤ 0, or
// for np to exceed the total slots.
func Assign(hosts []Host, np int) ([]Slot, error) {
	if err := checkAssignArgs(hosts, np); err != nil {
		return nil, err
	}
	slots := make([]Slot, 0, np)
	var hostsWith []int // hostsWith[lr]: hosts seen so far with local rank lr
	for _, h := range hosts {
		n := min(h.Slots, np-len(slots))
		for lr := range n {
			if lr == len(hostsWith) {
				hostsWith = append(hostsWith, 0)
			}
			slots = append(slots, Slot{
				Host: h.Name, Rank: len(slots), LocalRank: lr, LocalSize: n,
				CrossRank: hostsWith[lr], Size: np,
			})
			hostsWith[lr]++
		}
	}
	for i := range slots {
		slots[i].CrossSize = hostsWith[slots[i].LocalRank]
	}
	return slots, nil
}

// checkAssignArgs validates the arguments of Assign.
func checkAssignArgs(hosts []Host, np int) error {
	if len(hosts) == 0 {
		return ErrNoHosts
	}
	if np <= 0 {
		return fmt.Errorf("%w: %d processes requested, need at least 1", ErrNumProc, np)
	}
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		switch {
		case h.Name == "":
			return fmt.Errorf("%w: empty host name", ErrHosts)
		case h.Slots <= 0 || h.Slots > MaxSlotsPerHost:
			return fmt.Errorf("%w: host %q has %d slots, want 1..%d", ErrHosts, h.Name, h.Slots, MaxSlotsPerHost)
		case seen[hostlist.Key(h.Name)]:
			return fmt.Errorf("%w: duplicate host %q", ErrHosts, h.Name)
		}
		seen[hostlist.Key(h.Name)] = true
	}
	if total := TotalSlots(hosts); np > total {
		return fmt.Errorf("%w: -np %d exceeds the %d slots available (%s)", ErrSlots, np, total, listHosts(hosts))
	}
	return nil
}

// listHosts formats hosts for an error message, "a:2, b:2", eliding the
// tail of a long list.
func listHosts(hosts []Host) string {
	items := make([]string, 0, maxListedHosts+1)
	for i, h := range hosts {
		if i == maxListedHosts {
			items = append(items, fmt.Sprintf("... %d more", len(hosts)-i))
			break
		}
		items = append(items, h.String())
	}
	return strings.Join(items, ", ")
}

// UsedHosts returns the hosts that slots place ranks on, in order of first
// appearance, each with Slots set to the number of its ranks. For the result
// of Assign this is the prefix of the hosts that received ranks.
func UsedHosts(slots []Slot) []Host {
	var hosts []Host
	index := make(map[string]int)
	for _, s := range slots {
		i, ok := index[s.Host]
		if !ok {
			i = len(hosts)
			index[s.Host] = i
			hosts = append(hosts, Host{Name: s.Host})
		}
		hosts[i].Slots++
	}
	return hosts
}
