package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// lockstep runs one negotiator per rank through whole cycles, doing itself
// what the Engine leaves to collectives: the Min all-reduce of the control
// vectors and the all-gather of the payloads. No goroutines, no transport.
type lockstep struct {
	t   testing.TB
	ns  []*negotiator
	now time.Time
	seq uint64
}

// tuning is the part of Config a negotiator reads.
type tuning struct {
	fusion                 int64
	cache                  int
	warn, shutdown, opTime time.Duration
}

func newLockstep(t testing.TB, size int, tu tuning) *lockstep {
	t.Helper()
	var cfg Config
	cfg.FusionThreshold, cfg.CacheCapacity = tu.fusion, tu.cache
	cfg.StallWarning, cfg.StallShutdown, cfg.OpTimeout = tu.warn, tu.shutdown, tu.opTime
	l := &lockstep{t: t, now: t0}
	for r := range size {
		l.ns = append(l.ns, newNegotiator(r, size, cfg, 0))
	}
	return l
}

// submit submits reqs on rank, in order, at l.now.
func (l *lockstep) submit(rank int, reqs ...Request) {
	for _, r := range reqs {
		l.seq++
		l.ns[rank].submit(&entry{req: r, submitted: l.now, seq: l.seq, slot: -1})
	}
}

// submitAll submits reqs on every rank.
func (l *lockstep) submitAll(reqs ...Request) {
	for r := range l.ns {
		l.submit(r, reqs...)
	}
}

// rankCycle is what one rank got from a cycle.
type rankCycle struct {
	agreement          // from exchanged
	decision           // from decide, unless exchanged stopped the rank
	payload   int      // bytes this rank proposed to gather
	inspected *logNote // from inspect
}

// cycle runs one cycle on every rank; the ranks in stopping announce a
// shutdown.
func (l *lockstep) cycle(stopping ...int) []rankCycle {
	l.t.Helper()
	props, ctl := l.propose(stopping...)
	return l.follow(props, ctl)
}

// propose begins a cycle on every rank and returns the proposals and the
// element-wise Min of their control vectors.
func (l *lockstep) propose(stopping ...int) ([]proposal, []byte) {
	l.t.Helper()
	props := make([]proposal, len(l.ns))
	for r, n := range l.ns {
		p, err := n.begin(l.now, slices.Contains(stopping, r))
		if err != nil {
			l.t.Fatalf("rank %d: begin: %v", r, err)
		}
		props[r] = p
	}
	ctl := slices.Clone(props[0].ctl)
	for r, p := range props {
		if len(p.ctl) != len(ctl) {
			l.t.Fatalf("rank %d: control vector of %d bytes, rank 0's has %d", r, len(p.ctl), len(ctl))
		}
		for i, b := range p.ctl {
			ctl[i] = min(ctl[i], b)
		}
	}
	return props, ctl
}

// follow hands every rank the exchanged vector ctl and, where it asks for
// one, the gather of every rank's payload in rank order; then it decides
// and, where the decision says so, inspects at l.now.
func (l *lockstep) follow(props []proposal, ctl []byte) []rankCycle {
	l.t.Helper()
	var gathered []byte
	for _, p := range props {
		gathered = append(gathered, p.payload...)
	}
	out := make([]rankCycle, len(l.ns))
	for r, n := range l.ns {
		rc := &out[r]
		rc.payload = len(props[r].payload)
		if rc.agreement = n.exchanged(slices.Clone(ctl), l.now); rc.err != nil {
			continue
		}
		if rc.gather != nil {
			if err := n.gathered(slices.Clone(gathered), n.start); err != nil {
				l.t.Fatalf("rank %d: gathered: %v", r, err)
			}
		}
		if rc.decision = n.decide(l.now); rc.decision.inspect { // as the Engine's cycle does
			rc.inspected = n.inspect(l.now)
		}
	}
	return out
}

// names lists the tasks' names.
func names(tasks []*task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.resp.name
	}
	return out
}

// planNames prints a decision's plan as names: "[[a b] [c]]".
func planNames(d decision) string {
	out := make([][]string, len(d.plan))
	for i, idx := range d.plan {
		for _, j := range idx {
			out[i] = append(out[i], d.tasks[j].resp.name)
		}
	}
	return fmt.Sprint(out)
}

// sameOnEveryRank fails unless f gives the same string on every rank, and
// returns it.
func sameOnEveryRank(t *testing.T, cs []rankCycle, what string, f func(rankCycle) string) string {
	t.Helper()
	want := f(cs[0])
	for r, c := range cs[1:] {
		if got := f(c); got != want {
			t.Fatalf("%s: rank %d has %s, rank 0 has %s", what, r+1, got, want)
		}
	}
	return want
}

// firedNames is sameOnEveryRank of the decided tasks' names.
func firedNames(t *testing.T, cs []rankCycle) string {
	t.Helper()
	return sameOnEveryRank(t, cs, "tasks", func(c rankCycle) string { return fmt.Sprint(names(c.tasks)) })
}
