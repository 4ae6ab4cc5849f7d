package collective

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// exchangePlans returns every rank's plan of the Agree exchange.
func exchangePlans(t *testing.T, n int) []*plan {
	t.Helper()
	plans := make([]*plan, n)
	for r := range plans {
		p, err := newPlan(RecursiveDoublingAllreduce(r, n, 1), r, n)
		if err != nil {
			t.Fatalf("size %d rank %d: %v", n, r, err)
		}
		plans[r] = p
	}
	return plans
}

// TestExchangeHops pins the hops of small exchanges. With 3 ranks, rank 0
// first takes rank 2's part (fold-in), so rank 1, which waits for rank 0's
// next message, allows two limits: one for rank 0's wait on rank 2, one for
// the skew between ranks 0 and 1.
func TestExchangeHops(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []string // per rank: its hops
	}{
		{1, []string{"[]"}},
		{2, []string{"[{1 [1]}]", "[{1 [0]}]"}},
		{3, []string{"[{1 [2]} {2 [1]} {3 []}]", "[{2 [0 2]}]", "[{1 []} {3 [0 1]}]"}},
		{4, []string{"[{1 [1]} {2 [2 3]}]", "[{1 [0]} {2 [2 3]}]", "[{1 [3]} {2 [0 1]}]", "[{1 [2]} {2 [0 1]}]"}},
	} {
		plans := exchangePlans(t, c.n)
		for r, want := range c.want {
			hops, err := exchangeHops(plans, r)
			if got := fmt.Sprint(hops); err != nil || got != want {
				t.Errorf("size %d rank %d: hops %s (%v), want %s", c.n, r, got, err, want)
			}
		}
	}
}

// TestExchangeHopsBound checks, for sizes up to 33, that every step gets a
// fresh limit after the one before it and after the step after which its
// peer sends, that a receive names the ranks it waits for, and that the
// longest wait grows with the number of rounds only.
func TestExchangeHopsBound(t *testing.T) {
	for n := 1; n <= 33; n++ {
		plans := exchangePlans(t, n)
		all := make([][]hop, n)
		for r := range plans {
			hops, err := exchangeHops(plans, r)
			if err != nil {
				t.Fatalf("size %d rank %d: %v", n, r, err)
			}
			all[r] = hops
		}
		rounds := 0
		for 1<<rounds < n {
			rounds++
		}
		for r, hops := range all {
			for i, h := range hops {
				st := plans[r].steps[i]
				prev := 0
				if i > 0 {
					prev = hops[i-1].budget
				}
				if h.budget < prev+1 || h.budget > rounds+2 {
					t.Fatalf("size %d rank %d step %d: budget %d after %d (%d rounds)", n, r, i, h.budget, prev, rounds)
				}
				if st.RecvFrom < 0 {
					continue
				}
				j := senderStep(plans, r, i)
				for k := range plans[st.RecvFrom].steps[:j] {
					if all[st.RecvFrom][k].budget >= h.budget {
						t.Fatalf("size %d rank %d step %d: budget %d, but rank %d may still wait at step %d until %d",
							n, r, i, h.budget, st.RecvFrom, k, all[st.RecvFrom][k].budget)
					}
				}
				if !slices.Contains(h.from, st.RecvFrom) || slices.Contains(h.from, r) {
					t.Fatalf("size %d rank %d step %d: waits for %v", n, r, i, h.from)
				}
			}
		}
	}
}

// TestExchangeHopsRejectBrokenPlans: a receive no one sends, and two ranks
// that each receive before sending, are errors, not hangs or overflows.
func TestExchangeHopsRejectBrokenPlans(t *testing.T) {
	recv := func(from int) Step {
		st := noStep()
		st.RecvFrom, st.Recv, st.Combine = from, Segment{Len: 1}, Copy
		return st
	}
	send := func(to int) Step {
		st := noStep()
		st.SendTo, st.Send = to, Segment{Len: 1}
		return st
	}
	for name, steps := range map[string][2][]Step{
		"unsent":   {{recv(1)}, {}},
		"deadlock": {{recv(1), send(1)}, {recv(0), send(0)}},
	} {
		plans := make([]*plan, 2)
		for r := range plans {
			p, err := newPlan(steps[r], r, 2)
			if err != nil {
				t.Fatal(err)
			}
			plans[r] = p
		}
		if _, err := exchangeHops(plans, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// senderStep is the step at which rank r's step i's message is sent.
func senderStep(plans []*plan, r, i int) int {
	q, tag := plans[r].steps[i].RecvFrom, plans[r].recvTag[i]
	for j, st := range plans[q].steps {
		if st.SendTo == r && plans[q].sendTag[j] == tag {
			return j
		}
	}
	panic(fmt.Sprintf("rank %d step %d: no sender", r, i))
}

// simState is one rank's vector in simulateExchange: whose contributions
// it holds and its answer codes.
type simState struct {
	has    []bool
	answer []byte
}

// simulateExchange runs the Agree exchange of n ranks without
// goroutines, as Comm.Agree does when the ranks in silent never
// answer and every other rank answers in time: a receive from a silent
// rank marks it, a peer marked already is skipped, a message folds in (or,
// for Copy, replaces) the sender's vector as of its step. It returns every
// rank's final vector.
func simulateExchange(t *testing.T, n int, silent []bool) []simState {
	plans := exchangePlans(t, n)
	memo := map[[2]int]simState{}
	var state func(r, i int) simState
	state = func(r, i int) simState {
		if s, ok := memo[[2]int{r, i}]; ok {
			return s
		}
		var s simState
		if i < 0 {
			s = simState{has: make([]bool, n), answer: make([]byte, n)}
			s.has[r] = true
			for q := range s.answer {
				s.answer[q] = AnswerOK
			}
		} else {
			prev := state(r, i-1)
			s = simState{has: slices.Clone(prev.has), answer: slices.Clone(prev.answer)}
			st := plans[r].steps[i]
			switch q := st.RecvFrom; {
			case q < 0 || s.answer[q] != AnswerOK:
			case silent[q]:
				s.answer[q] = AnswerSilent
			default:
				got := state(q, senderStep(plans, r, i)-1)
				if st.Combine == Copy {
					s = simState{has: slices.Clone(got.has), answer: slices.Clone(got.answer)}
				} else {
					for x := range s.has {
						s.has[x] = s.has[x] || got.has[x]
						s.answer[x] = min(s.answer[x], got.answer[x])
					}
				}
			}
		}
		memo[[2]int{r, i}] = s
		return s
	}
	out := make([]simState, n)
	for r := range out {
		out[r] = state(r, len(plans[r].steps)-1)
	}
	return out
}

// TestExchangeVerdict: for every size up to 17 and every silent rank (and
// every pair of silent ranks up to 9), every rank that answers ends the
// exchange naming silent ranks only, and at least one; with no silent rank
// every rank holds every contribution and no mark. A rank that names no one
// holds every contribution.
func TestExchangeVerdict(t *testing.T) {
	check := func(n int, silent []bool) {
		for r, s := range simulateExchange(t, n, silent) {
			if silent[r] {
				continue
			}
			named, complete := 0, !slices.Contains(s.has, false)
			for q, a := range s.answer {
				if a != AnswerOK {
					named++
					if !silent[q] || a != AnswerSilent {
						t.Fatalf("size %d silent %v: rank %d marks rank %d (%d)", n, silent, r, q, a)
					}
				}
			}
			if anySilent := slices.Contains(silent, true); anySilent != (named > 0) || (named == 0 && !complete) {
				t.Fatalf("size %d silent %v: rank %d names %d ranks, holds %v", n, silent, r, named, s.has)
			}
		}
	}
	for n := 1; n <= 17; n++ {
		check(n, make([]bool, n))
		for f := range n {
			silent := make([]bool, n)
			silent[f] = true
			check(n, silent)
			for g := f + 1; g < n && n <= 9; g++ {
				two := slices.Clone(silent)
				two[g] = true
				check(n, two)
			}
		}
	}
}
