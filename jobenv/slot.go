package jobenv

// Slot is the place of one rank in the job: its host and the numbers that
// the worker sees in its environment (see Env). The launcher (runner.Assign)
// makes one per rank (runner.Slot has the same fields); SlotsOf works them
// out from the hosts that ranks register.
type Slot struct {
	Host      string // host name, as in the host list
	Rank      int    // global rank, 0..Size-1
	LocalRank int    // index of this rank among the ranks on its host
	LocalSize int    // number of ranks placed on this host
	CrossRank int    // position of the host among the hosts that have a rank with this LocalRank
	CrossSize int    // number of hosts that have a rank with this LocalRank
	Size      int    // total number of ranks (np)
}

// SlotsOf returns the slot of every rank of a job whose rank r runs on
// hostOf[r], by the rules of the launcher's slot assignment (runner.Assign):
// hosts are ordered by their lowest rank, LocalRank counts the ranks of a
// host in rank order, and CrossRank is a host's position among the hosts
// that have a rank with that LocalRank. Launchers that do not tell the local and cross ranks get them
// this way from the hosts their ranks register.
func SlotsOf(hostOf []string) []Slot {
	slots := make([]Slot, len(hostOf))
	byHost := make(map[string][]int) // ranks of each host, in order
	var order []string               // hosts by their lowest rank
	for r, h := range hostOf {
		if _, seen := byHost[h]; !seen {
			order = append(order, h)
		}
		byHost[h] = append(byHost[h], r)
	}
	var hostsWith []int // hostsWith[lr]: hosts seen so far with local rank lr
	for _, h := range order {
		ranks := byHost[h]
		for lr, r := range ranks {
			if lr == len(hostsWith) {
				hostsWith = append(hostsWith, 0)
			}
			slots[r] = Slot{Host: h, Rank: r, LocalRank: lr, LocalSize: len(ranks),
				CrossRank: hostsWith[lr], Size: len(hostOf)}
			hostsWith[lr]++
		}
	}
	for i := range slots {
		slots[i].CrossSize = hostsWith[slots[i].LocalRank]
	}
	return slots
}
