package collective

import "fmt"

// plan is a schedule prepared for execution: for each step, which earlier
// step it must wait for, and the per-link message numbers used as tags.
// Plans are pure and cached per (algorithm, shape) by the communicator.
type plan struct {
	steps []Step
	// sendAfter[i] is the latest receive step (< i) whose segment overlaps
	// step i's send (read after write), or -1. Receives complete in order,
	// so waiting for the latest one suffices.
	sendAfter []int
	// recvAfter[i] is the latest send step (<= i) whose segment overlaps
	// step i's receive (write after read), or -1.
	recvAfter []int
	// reduceAfter[i] is the latest receive step (< i) whose segment
	// overlaps step i's receive, or -1: a receive that reduces straight
	// into the buffer waits for its reduction (see ReduceReceiver).
	reduceAfter []int
	// sendTag[i], recvTag[i]: the index of this message on its link.
	sendTag, recvTag []uint32
	// scratch is the largest Reduce segment, in elements.
	scratch int
	// maxMsg is the largest message, in elements.
	maxMsg int
	// links are the peers this rank sends to, with the messages and
	// elements it sends each of them over the whole plan.
	links []linkLoad
	// overlapped: the schedule needs sends to run ahead of receives (the
	// two-level ones), so it runs pipelined whatever its links buffer.
	overlapped bool
	// lockstep: every message the plan sends at step i is received by
	// its peer at that peer's step i (the rings), so that ranks may run
	// it step by step with each step's send and receive moving together
	// (see run.runExchange).
	lockstep bool
	// ringLead, for a ring all-reduce among more than two ranks, is the
	// most messages a link may hold unread while this rank runs it
	// inline (see Comm.ringBuffers); 0 for any other plan.
	ringLead int
}

// linkLoad is what a plan sends on one link.
type linkLoad struct {
	peer, msgs, elems int
}

// newPlan checks steps against the rank and size and derives the
// dependencies and tags.
func newPlan(steps []Step, rank, size int) (*plan, error) {
	p := &plan{
		steps:       steps,
		sendAfter:   make([]int, len(steps)),
		recvAfter:   make([]int, len(steps)),
		reduceAfter: make([]int, len(steps)),
		sendTag:     make([]uint32, len(steps)),
		recvTag:     make([]uint32, len(steps)),
	}
	sent, recvd := map[int]uint32{}, map[int]uint32{}
	load := map[int]int{} // peer -> index in p.links
	for i, st := range steps {
		if err := checkStep(st, rank, size); err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		p.sendAfter[i], p.recvAfter[i], p.reduceAfter[i] = -1, -1, -1
		if st.SendTo >= 0 {
			p.sendAfter[i] = p.lastRecvOverlapping(i, st.Send)
			p.sendTag[i] = sent[st.SendTo]
			sent[st.SendTo]++
			k, ok := load[st.SendTo]
			if !ok {
				k = len(p.links)
				load[st.SendTo] = k
				p.links = append(p.links, linkLoad{peer: st.SendTo})
			}
			p.links[k].msgs++
			p.links[k].elems += st.Send.Len
			p.maxMsg = max(p.maxMsg, st.Send.Len)
		}
		if st.RecvFrom >= 0 {
			p.recvAfter[i] = p.lastSendOverlapping(i, st.Recv)
			p.reduceAfter[i] = p.lastRecvOverlapping(i, st.Recv)
			p.recvTag[i] = recvd[st.RecvFrom]
			recvd[st.RecvFrom]++
			p.maxMsg = max(p.maxMsg, st.Recv.Len)
			if st.Combine == Reduce {
				p.scratch = max(p.scratch, st.Recv.Len)
			}
		}
	}
	return p, nil
}

func checkStep(st Step, rank, size int) error {
	if st.SendTo == rank || st.RecvFrom == rank || st.SendTo >= size || st.RecvFrom >= size {
		return fmt.Errorf("%w: peer out of range (send %d, recv %d, rank %d, size %d)", ErrInvalid, st.SendTo, st.RecvFrom, rank, size)
	}
	if st.RecvFrom >= 0 && st.Combine != Copy && st.Combine != Reduce {
		return fmt.Errorf("%w: receive without a combine mode", ErrInvalid)
	}
	if st.SendTo >= 0 && st.RecvFrom >= 0 && st.Send.overlaps(st.Recv) && st.Combine == Copy {
		return fmt.Errorf("%w: step overwrites the segment it sends", ErrInvalid)
	}
	return nil
}

func (p *plan) lastRecvOverlapping(i int, s Segment) int {
	for j := i - 1; j >= 0; j-- {
		if p.steps[j].RecvFrom >= 0 && p.steps[j].Recv.overlaps(s) {
			return j
		}
	}
	return -1
}

func (p *plan) lastSendOverlapping(i int, s Segment) int {
	for j := i; j >= 0; j-- {
		if p.steps[j].SendTo >= 0 && p.steps[j].Send.overlaps(s) {
			return j
		}
	}
	return -1
}
