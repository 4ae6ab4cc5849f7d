package runner

import (
	"fmt"

	"github.com/gorovod/gorovod/jobenv"
)

// AssignPS places the ranks of a parameter-server job of workers workers
// and servers parameter servers on hosts, and returns one Slot per rank in
// rank order: rank 0 the chief, ranks 1..workers the workers, the last
// servers ranks the servers (as jobenv.DetectTask reads them). The servers
// and the workers take slots: the servers first, spread across the hosts
// one per host in turn (a host without a free slot is skipped), then the
// workers fill the free slots host by host, in order. The chief runs on
// the first host without taking a slot. LocalRank, LocalSize, CrossRank
// and CrossSize count every rank on a host, the chief too (see
// jobenv.SlotsOf). It is an error for the hosts to be malformed (as for
// Assign), for workers or servers to be below 1, or for workers+servers
// to exceed the slots; the message gives the numbers.
func AssignPS(hosts []Host, workers, servers int) ([]Slot, error) {
	if err := checkAssignPSArgs(hosts, workers, servers); err != nil {
		return nil, err
	}
	free := make([]int, len(hosts))
	for i, h := range hosts {
		free[i] = h.Slots
	}
	psHost := make([]string, servers)
	next := 0
	for i := range psHost {
		for free[next] == 0 {
			next = (next + 1) % len(hosts)
		}
		psHost[i] = hosts[next].Name
		free[next]--
		next = (next + 1) % len(hosts)
	}
	hostOf := []string{hosts[0].Name}
	for i, h := range hosts {
		for ; free[i] > 0 && len(hostOf) < 1+workers; free[i]-- {
			hostOf = append(hostOf, h.Name)
		}
	}
	hostOf = append(hostOf, psHost...)
	return slotsOfHosts(hostOf), nil
}

// checkAssignPSArgs validates the arguments of AssignPS.
func checkAssignPSArgs(hosts []Host, workers, servers int) error {
	switch {
	case servers < 1:
		return fmt.Errorf("%w: --ps %d: a parameter-server job needs at least 1 server", ErrNumProc, servers)
	case workers < 1:
		return fmt.Errorf("%w: -np %d: a parameter-server job needs at least 1 worker", ErrNumProc, workers)
	}
	if err := checkAssignArgs(hosts, 1); err != nil {
		return err
	}
	if total := TotalSlots(hosts); workers+servers > total {
		return fmt.Errorf("%w: --ps %d servers and -np %d workers need %d slots, but the hosts have %d (%s); the chief takes none",
			ErrSlots, servers, workers, workers+servers, total, listHosts(hosts))
	}
	return nil
}

// slotsOfHosts returns the slots of the ranks whose rank r runs on
// hostOf[r] (jobenv.SlotsOf in runner's Slot type).
func slotsOfHosts(hostOf []string) []Slot {
	js := jobenv.SlotsOf(hostOf)
	slots := make([]Slot, len(js))
	for i, s := range js {
		slots[i] = Slot(s)
	}
	return slots
}
