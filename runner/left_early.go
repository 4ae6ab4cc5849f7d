package runner

import (
	"fmt"
	"slices"

	"github.com/gorovod/gorovod/rendezvous"
)

// registry is what strandWatch reads of the rendezvous: who registered,
// and when that changes.
type registry interface {
	Registered() int
	Missing() []rendezvous.Peer
	Changed() <-chan struct{}
}

// strandWatch notes a rank that exited with status 0. One that never
// registered with the rendezvous strands the ranks that did: they would
// wait for it until their start timeout. The first such rank stops the job
// as soon as any rank has registered; until then strandWatch watches the
// rendezvous for a registration (joins). A job whose program never joins
// (gorun -np 2 hostname) is not affected: nobody registers.
type strandWatch struct {
	reg   registry
	early *ExitError      // the first rank that exited 0 before joining, or nil
	joins <-chan struct{} // rendezvous changes, watched while early may strand others; or nil
}

// left takes in rank, on host, that exited with status 0, and returns the
// cause to stop the job with, or nil.
func (s *strandWatch) left(rank int, host string) error {
	if s.early != nil || !s.unregistered(rank) {
		return nil
	}
	s.early = &ExitError{Rank: rank, Host: host, Status: 0}
	return s.check()
}

// check returns the error that stops the job because early left before
// joining, once some rank has registered; until then it watches the
// rendezvous (joins) for a registration. It returns nil when there is
// nothing to watch. It runs again when joins fires.
func (s *strandWatch) check() error {
	s.joins = nil
	if s.early == nil {
		return nil
	}
	changed := s.reg.Changed() // before reading, so that no registration is missed
	if s.reg.Registered() == 0 {
		s.joins = changed
		return nil
	}
	return fmt.Errorf("%w before joining the job", s.early)
}

// stop ends the watch: a failure is being judged, which names its own
// culprit.
func (s *strandWatch) stop() { s.joins = nil }

// unregistered reports whether rank has not registered with the rendezvous.
func (s *strandWatch) unregistered(rank int) bool {
	return slices.ContainsFunc(s.reg.Missing(), func(p rendezvous.Peer) bool { return p.Rank == rank })
}
