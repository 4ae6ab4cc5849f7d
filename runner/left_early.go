package runner

import (
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/runner/rendezvous"
)

// leftEarly notes a rank that exited with status 0. One that never
// registered with the rendezvous strands the ranks that did: they would
// wait for it until their start timeout. The first such rank stops the job
// as soon as any rank has registered (see stranded), unless a failure is
// already being judged. A job whose program never joins (gorun -np 2
// hostname) is not affected: nobody registers.
func (j *job) leftEarly(rank int) error {
	if j.early != nil || len(j.fails) > 0 || !j.unregistered(rank) {
		return nil
	}
	j.early = &ExitError{Rank: rank, Host: j.ranks[rank].slot.Host, Status: 0}
	return j.stranded()
}

// stranded returns the error that stops the job because j.early left
// before joining, once some rank has registered; until then it watches the
// rendezvous (j.joins) for a registration. It returns nil when there is
// nothing to watch.
func (j *job) stranded() error {
	j.joins = nil
	if j.failure != nil || j.early == nil || len(j.fails) > 0 {
		return nil
	}
	changed := j.srv.Changed() // before reading, so that no registration is missed
	if j.srv.Registered() == 0 {
		j.joins = changed
		return nil
	}
	return fmt.Errorf("%w before joining the job", j.early)
}

// unregistered reports whether rank has not registered with the rendezvous.
func (j *job) unregistered(rank int) bool {
	return slices.ContainsFunc(j.srv.Missing(), func(p rendezvous.Peer) bool { return p.Rank == rank })
}
