package runner

import (
	"errors"
	"strconv"
	"time"
)

// blameWindow is how long Launch waits, after the first rank fails, for
// the exits and reports that tell which rank failed on its own. It chooses
// sooner when every rank has ended or a rank was killed by a signal that
// it did not report as caused by a peer. When the window ends with only
// failures that blamed a peer, the rank that caused them has yet to end
// (it may be writing a core dump, or stuck in its Shutdown): Launch waits
// on for a failure of another kind, up to blameWait after the first.
const (
	blameWindow = 500 * time.Millisecond
	blameWait   = 3 * time.Second
)

// FailedBecauseKey is the rendezvous key under which a rank reports that
// its failure was caused by another rank. hvd writes it (best effort,
// within a short timeout) before the failure reaches the program, so the
// report is in place when the rank exits. The value is the decimal rank of
// the peer that went away, PeerGone when the error does not say which, or
// PeerShutdown. Launch reads it to choose which failed rank to name (see
// culprit); any value counts.
func FailedBecauseKey(rank int) string { return "failed-because/" + strconv.Itoa(rank) }

// FailedBecauseKey values besides a peer's rank.
const (
	// PeerGone: a peer went away (its link broke), the error does not say
	// which.
	PeerGone = "peer-gone"
	// PeerShutdown: a peer shut its runtime down while this rank's
	// operations needed it.
	PeerShutdown = "peer-shutdown"
)

// failedRank is a rank that failed, as Launch saw it.
type failedRank struct {
	rank    int
	err     error  // what Process.Wait returned; never nil
	because string // the rank's FailedBecauseKey report; "" if it made none
}

// standing ranks a failure for blame, lowest first: a death by a signal,
// then another failure, each unless the rank reported that a peer caused
// it; then the failures that ranks reported as caused by a peer.
func (f failedRank) standing() int {
	switch {
	case f.because != "":
		return 2
	case killedBySignal(f.err):
		return 0
	default:
		return 1
	}
}

// killedBySignal reports whether err says a rank died of a signal.
func killedBySignal(err error) bool {
	ee, ok := errors.AsType[*ExitError](err)
	return ok && ee.Signal != ""
}

// culprit returns the index in fails, which are in the order the ranks
// exited, of the rank to name as the job's failure: the one with the lowest
// standing, the earliest among equals. fails must not be empty.
func culprit(fails []failedRank) int {
	best := 0
	for i, f := range fails {
		if f.standing() < fails[best].standing() {
			best = i
		}
	}
	return best
}

// judge takes in the exit of a rank while the job runs, and returns the
// cause to stop the job with now, or nil. A failure opens the blame window
// (blame chooses when it ends), except a death by a signal that the rank
// did not report as caused by a peer: nothing can outrank the first one.
// A rank that exited 0 may have left before joining (leftEarly).
func (j *job) judge(ex rankExit) error {
	if j.failure != nil {
		return nil
	}
	if j.elastic != nil {
		return j.elasticExit(ex)
	}
	if ex.err == nil {
		return j.leftEarly(ex.rank)
	}
	f := failedRank{rank: ex.rank, err: ex.err, because: j.report(ex.rank)}
	j.fails = append(j.fails, f)
	if f.standing() == 0 || j.waitedOn && f.standing() == 1 {
		return j.blame()
	}
	if j.choose == nil {
		j.choose = time.After(blameWindow)
	}
	return nil
}

// windowEnded returns the cause to stop the job with when the blame window
// ends, or nil when every failure so far blamed a peer: then it waits on,
// up to blameWait after the first failure, for one that did not (judge
// stops the job when it comes).
func (j *job) windowEnded() error {
	j.reread()
	if !j.waitedOn && j.fails[culprit(j.fails)].standing() == 2 {
		j.waitedOn = true
		j.choose = time.After(blameWait - blameWindow)
		return nil
	}
	return j.blame()
}

// blame chooses, among the ranks failed so far, the one to name (see
// culprit) and returns its error. It reads the reports again, since a rank
// may report after Launch saw it exit; the other failures are logged.
func (j *job) blame() error {
	j.reread()
	c := j.fails[culprit(j.fails)]
	for _, f := range j.fails {
		if f.rank != c.rank {
			j.log.Info("gorun: rank failed too", "rank", f.rank, "err", f.err,
				"because", f.because, "blamed", c.rank)
		}
	}
	return c.err
}

// reread reads the reports of the failed ranks again.
func (j *job) reread() {
	for i := range j.fails {
		j.fails[i].because = j.report(j.fails[i].rank)
	}
}

// report is what rank reported as the cause of its failure (see
// FailedBecauseKey), or "" if it reported nothing.
func (j *job) report(rank int) string {
	v, ok := j.srv.Value(FailedBecauseKey(rank))
	switch {
	case !ok:
		return ""
	case len(v) == 0:
		return "unspecified"
	}
	return string(v)
}
