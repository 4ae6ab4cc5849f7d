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

// blamer gathers the failures of a job's ranks, and says when to choose
// the rank to name (due) and whom (verdict). A failure opens the blame
// window, except a death by a signal that the rank did not report as
// caused by a peer: nothing can outrank the first one, so the verdict is
// due at once. When the window ends with only failures that blamed a peer,
// it waits on, up to blameWait after the first failure, for one that did
// not. It reads the ranks' reports through report and sees which are
// running through running; times come in as arguments.
type blamer struct {
	report  func(rank int) string // the rank's FailedBecauseKey report, "" if none
	running func(rank int) bool   // the rank was started and has not exited

	fails    []failedRank // ranks failed so far, in order of exit
	due      time.Time    // the end of the window (or of the wait); zero unless choosing
	waitedOn bool         // the window ended with only failures that blamed a peer
}

// failed takes in the failure of rank with err at now, and reports
// whether the verdict is due at once.
func (b *blamer) failed(rank int, err error, now time.Time) bool {
	f := failedRank{rank: rank, err: err, because: b.report(rank)}
	b.fails = append(b.fails, f)
	if f.standing() == 0 || b.waitedOn && f.standing() == 1 {
		return true
	}
	if b.due.IsZero() {
		b.due = now.Add(blameWindow)
	}
	return false
}

// pending reports whether a rank has failed: a verdict is to come.
func (b *blamer) pending() bool { return len(b.fails) > 0 }

// windowEnded takes in the end of the blame window at now, and reports
// whether the verdict is due; it is not when every failure so far blamed
// a peer and none named a rank as not answering: then it waits on, up to
// blameWait after the first failure, for one that did not (failed says
// when it comes), and says due at the end of that wait.
func (b *blamer) windowEnded(now time.Time) bool {
	b.reread()
	if _, ok := b.unresponsive(); !ok && !b.waitedOn && b.fails[culprit(b.fails)].standing() == 2 {
		b.waitedOn = true
		b.due = now.Add(blameWait - blameWindow)
		return false
	}
	b.due = time.Time{}
	return true
}

// blameVerdict is whom a blamer names: the culprit among the failed ranks,
// or, when silent, the rank that the failed ranks reported as not
// answering (with silentExit, its own failure if it has one).
type blameVerdict struct {
	culprit    failedRank
	silent     bool
	vote       silentVote
	silentExit error
	others     []failedRank // the failures not named, in order of exit
}

// blamed is the rank the verdict names.
func (v blameVerdict) blamed() int {
	if v.silent {
		return v.vote.rank
	}
	return v.culprit.rank
}

// verdict chooses, among the ranks failed so far (there must be one), the
// one to name (see the function verdict). It reads the reports again,
// since a rank may report after Launch saw it exit.
func (b *blamer) verdict() blameVerdict {
	b.reread()
	i, vote, silent := verdict(b.fails, b.eligible)
	v := blameVerdict{culprit: b.fails[i], silent: silent, vote: vote}
	if silent {
		if i := slices.IndexFunc(b.fails, func(f failedRank) bool { return f.rank == vote.rank }); i >= 0 {
			v.silentExit = b.fails[i].err
		}
	}
	for _, f := range b.fails {
		if f.rank != v.blamed() {
			v.others = append(v.others, f)
		}
	}
	return v
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
func (b *blamer) unresponsive() (silentVote, bool) { return unresponsive(b.fails, b.eligible) }

// eligible reports whether rank may be named as not answering: it is
// still running, or it has failed.
func (b *blamer) eligible(rank int) bool {
	return b.running(rank) || slices.ContainsFunc(b.fails, func(f failedRank) bool { return f.rank == rank })
}

// reread reads the reports of the failed ranks again.
func (b *blamer) reread() {
	for i := range b.fails {
		b.fails[i].because = b.report(b.fails[i].rank)
	}
}
