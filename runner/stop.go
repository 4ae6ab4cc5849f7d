package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"
)

// killWait bounds how long Launch waits for ranks to be gone after SIGKILL
// before it gives up on them.
const killWait = 2 * time.Second

// escalation stops the running ranks of a job in steps: SIGTERM to each
// (SIGKILL at once to a rank that stopped answering: SIGTERM would wait
// on a stopped process), SIGKILL to those still running when the grace
// period is over, and giving up on them killWait later. It counts what it
// did, for Launch's error (describe). The zero escalation has not begun.
type escalation struct {
	grace time.Duration
	log   *slog.Logger

	step     int       // 0: not begun, 1: the grace period, 2: after SIGKILL, 3: given up
	due      time.Time // when next is to run; zero before begin and after giving up
	frozen   *rankProc // the blamed rank that stopped answering, killed at once; or nil
	stopping int       // ranks that were running when the stop began, the frozen one aside
	killed   int       // ranks that needed SIGKILL after the grace period
}

// begin stops the ranks live (started and not exited) at now: SIGKILL to
// frozen (nil: none), SIGTERM to the others. next is due when the grace
// period is over.
func (e *escalation) begin(live []*rankProc, frozen *rankProc, now time.Time) {
	e.step, e.due, e.frozen, e.stopping = 1, now.Add(e.grace), frozen, len(live)
	if r := frozen; r != nil && !r.done {
		e.stopping--
		e.log.Info("gorun: killing the rank that stopped answering", "rank", r.slot.Rank, "host", r.slot.Host)
		if err := r.proc.Kill(); err != nil {
			e.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
		}
	}
	for _, r := range live {
		if r == frozen {
			continue
		}
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			e.log.Info("gorun: SIGTERM", "rank", r.slot.Rank, "err", err)
		}
	}
}

// next takes the next step at now, with live the ranks still running:
// after the grace period SIGKILL to each (next is due again killWait
// later); after that it gives up on them and reports so (true).
func (e *escalation) next(live []*rankProc, now time.Time) (gaveUp bool) {
	if e.step != 1 {
		e.step, e.due = 3, time.Time{}
		return true
	}
	for _, r := range live {
		if r == e.frozen { // killed when the stop began; not gone yet
			if err := r.proc.Kill(); err != nil {
				e.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
			}
			continue
		}
		e.killed++
		e.log.Info("gorun: rank did not stop in time; killing it", "rank", r.slot.Rank, "grace", e.grace)
		if err := r.proc.Kill(); err != nil {
			e.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
		}
	}
	e.step, e.due = 2, now.Add(killWait)
	return false
}

// describe is Launch's error for a job stopped by failure: the failure
// with what was done about the other ranks. stuck, if not nil, says that
// some ranks could not be confirmed gone.
func (e *escalation) describe(failure, stuck error) error {
	var what string
	if e.frozen != nil {
		what = "killed it"
	}
	switch {
	case e.stopping == 0 && stuck == nil && what == "":
		return failure
	case e.stopping == 0 && what != "": // the frozen rank was the only one running
	case errors.Is(failure, ErrInterrupted):
		what = fmt.Sprintf("stopped %d running %s", e.stopping, plural(e.stopping, "rank"))
	case e.stopping == 1:
		what = join(what, "stopped the other rank")
	default:
		what = join(what, fmt.Sprintf("stopped the other %d ranks", e.stopping))
	}
	if e.killed > 0 {
		what += fmt.Sprintf(" (%d with SIGKILL after the %v grace period)", e.killed, e.grace)
	}
	if stuck != nil {
		return fmt.Errorf("%w; %s; %w", failure, what, stuck)
	}
	return fmt.Errorf("%w; %s", failure, what)
}
