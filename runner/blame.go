package runner

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorovod/gorovod/jobenv"
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

// UnresponsiveError names a rank that other ranks waited for in vain:
// their operations failed because it did not answer within their op
// timeout (or stall shutdown time), and they reported it (jobenv.SilentBecause).
// Launch returns it, in place of those ranks' own failures, when it blames
// such a rank; it kills the rank at once with SIGKILL, which reaches a
// stopped process too.
type UnresponsiveError struct {
	Rank       int
	Host       string
	Limit      time.Duration // the longest wait reported; 0 if none was given
	ReportedBy []int         // the failed ranks that named it, in rank order
	Exit       error         // the rank's own failure if it had ended when blamed, else nil
}

// Error says which rank stopped answering and who found it:
// "runner: rank 1 on node2 stopped answering (no answer within 2s,
// reported by ranks 0 and 2)".
func (e *UnresponsiveError) Error() string {
	by := "rank " + strconv.Itoa(e.ReportedBy[0])
	if n := len(e.ReportedBy); n > 1 {
		rs := make([]string, n)
		for i, r := range e.ReportedBy {
			rs[i] = strconv.Itoa(r)
		}
		by = "ranks " + strings.Join(rs[:n-1], ", ") + " and " + rs[n-1]
	}
	within := ""
	if e.Limit > 0 {
		within = " within " + e.Limit.String()
	}
	return fmt.Sprintf("runner: rank %d on %s stopped answering (no answer%s, reported by %s)", e.Rank, e.Host, within, by)
}

// Unwrap returns the rank's own failure, if it had ended.
func (e *UnresponsiveError) Unwrap() error { return e.Exit }

// failedRank is a rank that failed, as Launch saw it.
type failedRank struct {
	rank    int
	err     error  // what Process.Wait returned; never nil
	because string // the rank's jobenv.FailedBecauseKey report; "" if it made none
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

// silentVote is a rank that failed ranks reported as not answering.
type silentVote struct {
	rank  int
	by    []int         // the failed ranks that named it, in order of exit
	limit time.Duration // the longest wait they reported
}

// unresponsive returns the rank that the reports in fails name as not
// answering (jobenv.SilentBecause), ok false if none does: the one named by most
// reports, the lowest rank among equals. A rank that itself reported
// another as silent is not chosen: it was answering, and a rank frozen in
// the middle of an exchange can leave other ranks naming, beside it, a
// rank that waited for it. eligible says whether a rank may be named: one
// that exited with status 0 cannot have stopped answering.
func unresponsive(fails []failedRank, eligible func(rank int) bool) (v silentVote, ok bool) {
	var votes []silentVote
	accusers := map[int]bool{}
	for _, f := range fails {
		ranks, limit, isSilent := jobenv.ParseSilent(f.because)
		if !isSilent {
			continue
		}
		accusers[f.rank] = true
		for _, r := range ranks {
			i := slices.IndexFunc(votes, func(v silentVote) bool { return v.rank == r })
			if i < 0 {
				votes, i = append(votes, silentVote{rank: r}), len(votes)
			}
			if !slices.Contains(votes[i].by, f.rank) {
				votes[i].by = append(votes[i].by, f.rank)
			}
			votes[i].limit = max(votes[i].limit, limit)
		}
	}
	for _, c := range votes {
		if accusers[c.rank] || !eligible(c.rank) {
			continue
		}
		if !ok || len(c.by) > len(v.by) || len(c.by) == len(v.by) && c.rank < v.rank {
			v, ok = c, true
		}
	}
	return v, ok
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
	if _, ok := j.unresponsive(); !ok && !j.waitedOn && j.fails[culprit(j.fails)].standing() == 2 {
		j.waitedOn = true
		j.choose = time.After(blameWait - blameWindow)
		return nil
	}
	return j.blame()
}

// blame chooses, among the ranks failed so far, the one to name (see
// culprit) and returns its error. It reads the reports again, since a rank
// may report after Launch saw it exit; the other failures are logged.
// When the failed ranks report that a rank did not answer them, that rank
// is named instead (an *UnresponsiveError; see unresponsive), whether it
// has ended or not, unless the culprit died of a signal on its own.
func (j *job) blame() error {
	j.reread()
	i, v, silent := verdict(j.fails, j.eligible)
	blamed, err := j.fails[i].rank, j.fails[i].err
	if silent {
		u := &UnresponsiveError{Rank: v.rank, Host: j.ranks[v.rank].slot.Host, Limit: v.limit, ReportedBy: slices.Sorted(slices.Values(v.by))}
		if i := slices.IndexFunc(j.fails, func(f failedRank) bool { return f.rank == v.rank }); i >= 0 {
			u.Exit = j.fails[i].err
		} else {
			j.frozen = j.ranks[v.rank]
		}
		blamed, err = v.rank, u
	}
	for _, f := range j.fails {
		if f.rank != blamed {
			j.log.Info("gorun: rank failed too", "rank", f.rank, "err", f.err,
				"because", f.because, "blamed", blamed)
		}
	}
	return err
}

// verdict chooses whom blame names among fails (not empty): fails[i], the
// culprit, or, when silent is true, the rank v that the failed ranks
// reported as not answering (see unresponsive; eligible as there). Such
// reports outrank every failure but the culprit's death by a signal that
// it did not blame on a peer.
func verdict(fails []failedRank, eligible func(rank int) bool) (i int, v silentVote, silent bool) {
	i = culprit(fails)
	if fails[i].standing() == 0 {
		return i, silentVote{}, false
	}
	v, silent = unresponsive(fails, eligible)
	return i, v, silent
}

// unresponsive returns the rank that the failed ranks reported as not
// answering, if any (see the function unresponsive).
func (j *job) unresponsive() (silentVote, bool) { return unresponsive(j.fails, j.eligible) }

// eligible reports whether rank may be named as not answering: it was
// started, and it is still running or has failed.
func (j *job) eligible(rank int) bool {
	if rank < 0 || rank >= len(j.ranks) || j.ranks[rank] == nil {
		return false
	}
	return !j.ranks[rank].done || slices.ContainsFunc(j.fails, func(f failedRank) bool { return f.rank == rank })
}

// reread reads the reports of the failed ranks again.
func (j *job) reread() {
	for i := range j.fails {
		j.fails[i].because = j.report(j.fails[i].rank)
	}
}

// report is what rank reported as the cause of its failure (see
// jobenv.FailedBecauseKey), or "" if it reported nothing.
func (j *job) report(rank int) string {
	v, ok := j.srv.Value(jobenv.FailedBecauseKey(rank))
	switch {
	case !ok:
		return ""
	case len(v) == 0:
		return "unspecified"
	}
	return string(v)
}
