package runner

import (
	"slices"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// staticJob is the controller of a job of a fixed set of ranks: the first
// failure stops it, and it names the rank that failed on its own
// (blamer), or a rank that left before joining and stranded the others
// (strandWatch).
type staticJob struct {
	j      *job
	blame  blamer
	strand strandWatch
}

func newStaticJob(j *job) *staticJob {
	s := &staticJob{j: j, strand: strandWatch{reg: j.srv}}
	s.blame = blamer{
		report: func(rank int) string { return report(j.srv, rank) },
		running: func(rank int) bool {
			return rank >= 0 && rank < len(j.ranks) && j.ranks[rank] != nil && !j.ranks[rank].done
		},
	}
	return s
}

// exited takes in the exit of a rank: a failure goes to the blamer, and
// stops the job once its verdict is due; a rank that exited 0 may have
// left before joining (strandWatch), unless a failure is being judged.
func (s *staticJob) exited(ex rankExit) error {
	switch {
	case ex.err != nil:
		s.strand.stop()
		if s.blame.failed(ex.rank, ex.err, time.Now()) {
			return s.blamed()
		}
		return nil
	case s.blame.pending():
		return nil
	}
	return s.strand.left(ex.rank, s.j.ranks[ex.rank].slot.Host)
}

// due is the end of the blame window (or wait).
func (s *staticJob) due() time.Time { return s.blame.due }

// tick ends the blame window.
func (s *staticJob) tick(now time.Time) error {
	if s.blame.windowEnded(now) {
		return s.blamed()
	}
	return nil
}

func (s *staticJob) wakeup() <-chan struct{} { return s.strand.joins }
func (s *staticJob) wake() error             { return s.strand.check() }

// settle names the rank to blame, if one failed before cause (or before
// every rank ended), else returns cause.
func (s *staticJob) settle(cause error) error {
	if s.blame.pending() {
		return s.blamed()
	}
	return cause
}

func (s *staticJob) holds() bool { return false }
func (s *staticJob) close()      {}

// blamed returns the error of the blamer's verdict: the culprit's, or an
// *UnresponsiveError for a rank that the failed ranks reported as not
// answering, whether it has ended or not (job.stop kills it at once if
// not). The other failures are logged.
func (s *staticJob) blamed() error {
	v := s.blame.verdict()
	err := v.culprit.err
	if v.silent {
		err = &UnresponsiveError{Rank: v.vote.rank, Host: s.j.ranks[v.vote.rank].slot.Host, Limit: v.vote.limit,
			ReportedBy: slices.Sorted(slices.Values(v.vote.by)), Exit: v.silentExit}
	}
	for _, f := range v.others {
		s.j.log.Info("gorun: rank failed too", "rank", f.rank, "err", f.err, "because", f.because, "blamed", v.blamed())
	}
	return err
}

// report is what rank reported as the cause of its failure (see
// FailedBecauseKey), or "" if it reported nothing.
func report(srv jobServer, rank int) string {
	v, ok := srv.Value(jobenv.FailedBecauseKey(rank))
	switch {
	case !ok:
		return ""
	case len(v) == 0:
		return "unspecified"
	}
	return string(v)
}
