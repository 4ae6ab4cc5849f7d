package collective

import (
	"fmt"
	"slices"
)

// hop is what one step of a rank's negotiation exchange may wait for. The
// exchange bounds its waits hop by hop: with the hop limit L (OpTimeout or
// the stall shutdown time), step i's Send and Recv must end by
// start + budget·L, where start is when this rank began the exchange.
type hop struct {
	// budget is, in hop limits, the latest end of the step: one limit more
	// than the latest end of this rank's previous step and of the step
	// after which the peer sends the awaited message. A peer that started
	// the exchange less than one limit after this rank and waited in vain
	// at each of its own steps until their ends still answers in time, so
	// a healthy rank is never blamed for waiting on a silent one.
	budget int
	// from lists the ranks whose contributions the awaited message carries
	// and that this rank has not heard from yet, in rank order: while the
	// step waits, one of them has not answered. Empty without a Recv.
	from []int
}

// exchangeHops derives the hops of rank's steps from every rank's plan of
// the same exchange (plans[r] is rank r's). It is a pure function of the
// schedule: the same for every count, so it is computed once per size.
func exchangeHops(plans []*plan, rank int) ([]hop, error) {
	s, err := newHopSolver(plans)
	if err != nil {
		return nil, err
	}
	hops := make([]hop, len(plans[rank].steps))
	for i, st := range plans[rank].steps {
		b, err := s.end(rank, i)
		if err != nil {
			return nil, err
		}
		hops[i].budget = b
		if st.RecvFrom < 0 {
			continue
		}
		j := s.sender[msgKey{st.RecvFrom, rank, plans[rank].recvTag[i]}]
		carried, err := s.heard(st.RecvFrom, j-1)
		if err != nil {
			return nil, err
		}
		mine, err := s.heard(rank, i-1)
		if err != nil {
			return nil, err
		}
		for _, r := range carried {
			if _, found := slices.BinarySearch(mine, r); !found {
				hops[i].from = append(hops[i].from, r)
			}
		}
	}
	return hops, nil
}

// msgKey names one message of an exchange: from, to and its tag on the link.
type msgKey struct {
	from, to int
	tag      uint32
}

// hopSolver memoises, per (rank, step), the latest end of the step (in hop
// limits) and the ranks heard from once the step is done.
type hopSolver struct {
	plans  []*plan
	sender map[msgKey]int // the step that sends each message
	ends   [][]int        // endUnknown, endVisiting or the end
	heards [][][]int
}

// Markers in hopSolver.ends.
const (
	endUnknown  = -1
	endVisiting = -2
)

// newHopSolver indexes the plans' messages by sender step; a receive that
// no plan sends is an error wrapping ErrInvalid.
func newHopSolver(plans []*plan) (*hopSolver, error) {
	s := &hopSolver{plans: plans, sender: map[msgKey]int{},
		ends: make([][]int, len(plans)), heards: make([][][]int, len(plans))}
	for r, p := range plans {
		s.ends[r] = make([]int, len(p.steps))
		for i := range s.ends[r] {
			s.ends[r][i] = endUnknown
		}
		s.heards[r] = make([][]int, len(p.steps))
		for i, st := range p.steps {
			if st.SendTo >= 0 {
				s.sender[msgKey{r, st.SendTo, p.sendTag[i]}] = i
			}
		}
	}
	for r, p := range plans {
		for i, st := range p.steps {
			if _, ok := s.sender[msgKey{st.RecvFrom, r, p.recvTag[i]}]; st.RecvFrom >= 0 && !ok {
				return nil, fmt.Errorf("%w: rank %d step %d receives message %d from rank %d, which never sends it",
					ErrInvalid, r, i, p.recvTag[i], st.RecvFrom)
			}
		}
	}
	return s, nil
}

// end is the latest end of rank r's step i, in hop limits after its start
// (0 for i < 0).
func (s *hopSolver) end(r, i int) (int, error) {
	if i < 0 {
		return 0, nil
	}
	switch e := s.ends[r][i]; e {
	case endVisiting:
		return 0, fmt.Errorf("%w: the exchange's steps wait for each other in a cycle at rank %d step %d", ErrInvalid, r, i)
	case endUnknown:
	default:
		return e, nil
	}
	s.ends[r][i] = endVisiting
	b, err := s.end(r, i-1)
	if err != nil {
		return 0, err
	}
	st, p := s.plans[r].steps[i], s.plans[r]
	if st.SendTo >= 0 || st.RecvFrom >= 0 {
		b++
	}
	if st.RecvFrom >= 0 {
		sent, err := s.end(st.RecvFrom, s.sender[msgKey{st.RecvFrom, r, p.recvTag[i]}]-1)
		if err != nil {
			return 0, err
		}
		b = max(b, sent+1)
	}
	s.ends[r][i] = b
	return b, nil
}

// heard is the sorted set of ranks whose contributions rank r holds once
// its step i is done ({r} for i < 0).
func (s *hopSolver) heard(r, i int) ([]int, error) {
	if i < 0 {
		return []int{r}, nil
	}
	if h := s.heards[r][i]; h != nil {
		return h, nil
	}
	h, err := s.heard(r, i-1)
	if err != nil {
		return nil, err
	}
	if st := s.plans[r].steps[i]; st.RecvFrom >= 0 {
		if _, err := s.end(r, i); err != nil { // rejects cycles before recursing
			return nil, err
		}
		got, err := s.heard(st.RecvFrom, s.sender[msgKey{st.RecvFrom, r, s.plans[r].recvTag[i]}]-1)
		if err != nil {
			return nil, err
		}
		h = union(h, got)
	}
	s.heards[r][i] = h
	return h, nil
}

// union merges two sorted sets of ranks.
func union(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}
