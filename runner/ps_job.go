package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/jobenv"
)

// TaskError is the failure of a process of a parameter-server job (gorun
// --ps) that decides its outcome: the chief that failed, a parameter
// server that ended before the chief or was still running after it, the
// evaluator that failed. It wraps the process's exit (an *ExitError, whose
// status gorun exits with) where it has one.
type TaskError struct {
	Role    string // jobenv.RoleChief, RolePS or RoleEvaluator
	Index   int    // among the tasks of its role
	Rank    int    // its rank; -1 for the evaluator, which is none
	Host    string
	Err     error  // how it ended: an *ExitError or a spawner's error; nil for status 0 or still running
	Running bool   // it had not ended: Why says what became of it
	Why     string // what made the ending a failure ("before the chief ended"), or ""
}

// Error says which task failed, how, and why that fails the job:
// "runner: parameter server 1 (rank 5) on b exited with status 0 before the chief ended".
func (e *TaskError) Error() string {
	var how string
	var ee *ExitError
	switch {
	case e.Running:
	case errors.As(e.Err, &ee) && ee.Signal != "":
		how = "was killed by " + ee.Signal
	case ee != nil:
		how = fmt.Sprintf("exited with status %d", ee.Status)
	case e.Err != nil:
		how = "failed: " + strings.TrimPrefix(e.Err.Error(), "runner: ")
	default:
		how = "exited with status 0"
	}
	msg := "runner: " + e.task() + " on " + e.Host
	for _, part := range []string{how, e.Why} {
		if part != "" {
			msg += " " + part
		}
	}
	return msg
}

// Unwrap returns the process's exit.
func (e *TaskError) Unwrap() error { return e.Err }

// task names the process: "chief (rank 0)", "parameter server 1 (rank 5)",
// "worker 2 (rank 3)" or "evaluator".
func (e *TaskError) task() string {
	return taskName(e.Role, e.Index, e.Rank)
}

// taskName names a process of a parameter-server job for messages.
func taskName(role string, index, rank int) string {
	switch role {
	case jobenv.RoleEvaluator:
		return "evaluator"
	case jobenv.RoleChief:
		return fmt.Sprintf("chief (rank %d)", rank)
	case jobenv.RolePS:
		return fmt.Sprintf("parameter server %d (rank %d)", index, rank)
	}
	return fmt.Sprintf("worker %d (rank %d)", index, rank)
}

// psJob is the controller of a parameter-server job (gorun --ps): rank 0
// the chief, ranks 1..M the workers, the last N ranks the servers, and
// maybe an evaluator. A worker that ends is logged and the job goes on
// (the chief runs its steps on the others). A server that fails before
// the chief ends, one that exits 0 while the chief still runs a grace
// period later (a chief that is ending tells the servers to stop before
// it exits), or a chief that fails, stops the job and is blamed; a chief
// that fails is blamed only if no server fails within the blame window
// after it (the chief fails when a server it uses dies). Once the
// chief has exited 0, the workers and servers are expected to exit on
// their own (the chief tells them to): those still running after the
// grace period (Config.GracePeriod) get SIGTERM, and SIGKILL one more
// grace period later; a server among them fails the job, as does one
// that exits non-zero. The evaluator may run on for EvaluatorTimeout after
// the chief ended, then gets SIGTERM (SIGKILL after the grace period); it
// fails the job only if it does not exit with status 0, which
// evaluator.Run does on SIGTERM. Those failures do not stop what is left
// of the job: Launch reports the first once everything has ended.
type psJob struct {
	j        *job
	workers  int
	eval     int // the evaluator's index in j.ranks; -1 without one
	grace    time.Duration
	evalWait time.Duration

	chiefEnded  bool
	stopAt      time.Time    // SIGTERM to the workers and servers still running
	killAt      time.Time    // SIGKILL to those still running
	evalStop    time.Time    // SIGTERM to the evaluator
	evalKill    time.Time    // SIGKILL to the evaluator
	chiefFailed *TaskError   // the chief's failure, blamed when the window ends without a server's
	blameAt     time.Time    // the end of that window
	earlyPS     int          // the first server that exited 0 while the chief ran; -1: none
	earlyAt     time.Time    // when that fails the job if the chief still runs
	stopped     map[int]bool // processes psJob sent SIGTERM
	failures    []error      // failures that did not stop the job, first first
}

func newPSJob(j *job) *psJob {
	return &psJob{j: j, workers: j.cfg.NP, eval: j.evaluatorIndex(), grace: j.cfg.GracePeriod,
		evalWait: j.cfg.EvaluatorTimeout, earlyPS: -1, stopped: map[int]bool{}}
}

// role returns the role and index of process i.
func (p *psJob) role(i int) (string, int) {
	switch {
	case i == p.eval:
		return jobenv.RoleEvaluator, 0
	case i == 0:
		return jobenv.RoleChief, 0
	case i <= p.workers:
		return jobenv.RoleWorker, i - 1
	}
	return jobenv.RolePS, i - 1 - p.workers
}

// taskError is the TaskError of process i that ended with err.
func (p *psJob) taskError(i int, err error, why string) *TaskError {
	role, index := p.role(i)
	rank := i
	if role == jobenv.RoleEvaluator {
		rank = -1
	}
	return &TaskError{Role: role, Index: index, Rank: rank, Host: p.j.ranks[i].slot.Host, Err: err, Why: why}
}

// exited takes in the exit of a process; see psJob.
func (p *psJob) exited(ex rankExit) error {
	role, _ := p.role(ex.rank)
	switch {
	case role == jobenv.RoleChief && ex.err != nil:
		p.chiefFailed, p.blameAt = p.taskError(ex.rank, ex.err, ""), time.Now().Add(blameWindow)
		p.earlyAt = time.Time{} // a server that exited 0 meanwhile is not the culprit
		p.j.log.Info("gorun: the chief failed; waiting for a server's failure that caused it", "err", ex.err, "window", blameWindow)
	case role == jobenv.RolePS && ex.err != nil && p.chiefFailed != nil:
		p.j.log.Info("gorun: the chief failed too", "err", p.chiefFailed)
		return p.taskError(ex.rank, ex.err, "before the chief ended")
	case role == jobenv.RoleChief:
		p.chiefDone(time.Now())
	case role == jobenv.RolePS && !p.chiefEnded && ex.err == nil:
		p.early(ex.rank, time.Now())
	case role == jobenv.RolePS && !p.chiefEnded:
		return p.taskError(ex.rank, ex.err, "before the chief ended")
	case role == jobenv.RolePS && ex.err != nil && !p.stopped[ex.rank]:
		p.fail(p.taskError(ex.rank, ex.err, "after the chief ended"))
	case role == jobenv.RoleWorker && !p.chiefEnded && ex.err == nil:
		p.j.log.Info("gorun: a worker exited with status 0 before the chief", "rank", ex.rank)
	case role == jobenv.RoleWorker && !p.chiefEnded && p.chiefSilent(ex.rank) != nil:
		return p.chiefSilent(ex.rank)
	case role == jobenv.RoleWorker && !p.chiefEnded:
		p.j.log.Warn("gorun: " + strings.TrimPrefix(p.taskError(ex.rank, ex.err, "").Error(), "runner: ") + ": the chief re-runs its steps on the other workers")
	case role == jobenv.RoleWorker && ex.err != nil && !p.stopped[ex.rank]:
		p.j.log.Info("gorun: a worker failed after the chief ended", "rank", ex.rank, "err", ex.err)
	case role == jobenv.RoleEvaluator && ex.err != nil && !p.stopped[ex.rank]:
		p.fail(p.taskError(ex.rank, ex.err, ""))
	case role == jobenv.RoleEvaluator && ex.err != nil:
		p.fail(p.taskError(ex.rank, ex.err, fmt.Sprintf("(it got SIGTERM %v after the chief ended, --evaluator-timeout, and must then exit 0)", p.evalWait)))
	}
	return nil
}

// early takes in server i that exited 0 while the chief runs: the chief
// may be ending (it told the servers to stop and has not exited yet), so
// the job fails only if the chief has not exited 0 within the grace
// period (tick).
func (p *psJob) early(i int, now time.Time) {
	if p.earlyPS < 0 {
		p.earlyPS, p.earlyAt = i, now.Add(p.grace)
	}
}

// chiefDone starts the clocks of the others' ends: the chief exited 0.
func (p *psJob) chiefDone(now time.Time) {
	p.chiefEnded = true
	p.earlyAt = time.Time{}
	p.stopAt = now.Add(p.grace)
	if p.eval >= 0 && p.running(p.eval) {
		p.evalStop = now.Add(p.evalWait)
	}
	p.j.log.Info("gorun: the chief ended; waiting for the workers and servers to exit", "grace", p.grace)
}

// fail records a failure that does not stop the job, and logs it.
func (p *psJob) fail(err error) {
	p.failures = append(p.failures, err)
	p.warn(err)
}

// warn logs err as a warning, "gorun: " in place of "runner: ".
func (p *psJob) warn(err error) {
	p.j.log.Warn("gorun: " + strings.TrimPrefix(err.Error(), "runner: "))
}

// running reports whether process i has started and not ended.
func (p *psJob) running(i int) bool {
	r := p.j.ranks[i]
	return r != nil && !r.done
}

// due is the earliest of the stop and kill times that are set.
func (p *psJob) due() time.Time {
	var first time.Time
	for _, t := range []time.Time{p.blameAt, p.earlyAt, p.stopAt, p.killAt, p.evalStop, p.evalKill} {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// tick stops the processes whose time has come.
func (p *psJob) tick(now time.Time) error {
	if p.chiefFailed != nil && !now.Before(p.blameAt) {
		return p.chiefVerdict()
	}
	if !p.earlyAt.IsZero() && !now.Before(p.earlyAt) {
		return p.taskError(p.earlyPS, nil, fmt.Sprintf("before the chief ended (which still ran %v later)", p.grace))
	}
	if !p.stopAt.IsZero() && !now.Before(p.stopAt) {
		p.stopAt, p.killAt = time.Time{}, now.Add(p.grace)
		for i := 1; i < len(p.j.slots); i++ {
			if p.running(i) {
				p.terminate(i, fmt.Sprintf("still running %v after the chief ended; stopped", p.grace))
			}
		}
	}
	if !p.killAt.IsZero() && !now.Before(p.killAt) {
		p.killAt = time.Time{}
		for i := 1; i < len(p.j.slots); i++ {
			p.kill(i)
		}
	}
	if !p.evalStop.IsZero() && !now.Before(p.evalStop) {
		p.evalStop, p.evalKill = time.Time{}, now.Add(p.grace)
		if p.running(p.eval) {
			p.j.log.Info("gorun: the evaluator is still running; stopping it", "evaluator_timeout", p.evalWait)
			p.stopped[p.eval] = true
			p.signal(p.eval)
		}
	}
	if !p.evalKill.IsZero() && !now.Before(p.evalKill) {
		p.evalKill = time.Time{}
		p.kill(p.eval)
	}
	return nil
}

// chiefVerdict is the error of a chief that failed with no server ending
// in the blame window: an *UnresponsiveError for a server the chief
// reported as not answering it (jobenv.SilentBecause, written by ps.Run)
// that still runs, which job.stop kills at once; else the chief's own.
func (p *psJob) chiefVerdict() error {
	ranks, limit, ok := jobenv.ParseSilent(report(p.j.srv, 0))
	if !ok {
		return p.chiefFailed
	}
	for _, r := range ranks {
		if r > 0 && r < len(p.j.slots) && r != p.eval {
			if role, _ := p.role(r); role == jobenv.RolePS && p.running(r) {
				p.j.log.Info("gorun: the chief failed because a parameter server stopped answering it", "chief", p.chiefFailed, "server_rank", r)
				return &UnresponsiveError{Rank: r, Host: p.j.ranks[r].slot.Host, Limit: limit, ReportedBy: []int{0}}
			}
		}
	}
	return p.chiefFailed
}

// chiefSilent is an *UnresponsiveError for the chief when worker rank
// failed after reporting that the chief, still running, stopped
// answering it (ps.Run does: RunWorker's ErrChiefUnreachable); else nil.
// A chief that no worker can reach would otherwise hold the job forever.
func (p *psJob) chiefSilent(rank int) error {
	ranks, limit, ok := jobenv.ParseSilent(report(p.j.srv, rank))
	if !ok || !slices.Contains(ranks, 0) || p.chiefFailed != nil || !p.running(0) {
		return nil
	}
	return &UnresponsiveError{Rank: 0, Host: p.j.ranks[0].slot.Host, Limit: limit, ReportedBy: []int{rank}}
}

// terminate sends SIGTERM to worker or server i, which is still running
// after the grace period: a server's doing so fails the job.
func (p *psJob) terminate(i int, why string) {
	p.stopped[i] = true
	err := p.taskError(i, nil, why)
	err.Running = true
	if role, _ := p.role(i); role == jobenv.RolePS {
		p.fail(err)
	} else {
		p.warn(err)
	}
	p.signal(i)
}

// signal sends SIGTERM to process i.
func (p *psJob) signal(i int) {
	if err := p.j.ranks[i].proc.Signal(syscall.SIGTERM); err != nil {
		p.j.log.Info("gorun: SIGTERM", "rank", i, "err", err)
	}
}

// kill sends SIGKILL to process i if it still runs.
func (p *psJob) kill(i int) {
	if !p.running(i) {
		return
	}
	p.j.log.Info("gorun: process did not stop in time; killing it", "rank", i, "grace", p.grace)
	if err := p.j.ranks[i].proc.Kill(); err != nil {
		p.j.log.Warn("gorun: SIGKILL", "rank", i, "err", err)
	}
}

func (p *psJob) wakeup() <-chan struct{} { return nil }
func (p *psJob) wake() error             { return nil }

// settle returns cause when it ends the job; once every process has
// ended, the first failure recorded (nil: the job succeeded).
func (p *psJob) settle(cause error) error {
	if p.chiefFailed != nil {
		return p.chiefFailed
	}
	if cause != nil || len(p.failures) == 0 {
		return cause
	}
	return p.failures[0]
}

func (p *psJob) holds() bool { return false }
func (p *psJob) close()      {}
