package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/runner/rendezvous"
)

// maxAdded bounds the ranks an elastic job can start beyond its first
// ones without a rank's waiting goroutine blocking once the job is over.
const maxAdded = 4096

// killWait bounds how long Launch waits for ranks to be gone after SIGKILL
// before it gives up on them.
const killWait = 2 * time.Second

// jobServer is the part of the rendezvous server that the job uses: it
// aborts the rendezvous when the job stops, reads the ranks' reports of
// why they failed, and sees which ranks have registered.
type jobServer interface {
	Abort(reason string)
	Value(key string) ([]byte, bool)
	Registered() int
	Missing() []rendezvous.Peer
	Changed() <-chan struct{}
	Set(ctx context.Context, key string, value []byte) error
}

// job is a launched set of ranks: it starts them, watches them, and stops
// them all at the first failure, naming the rank that failed on its own
// (blame.go). It is used by one goroutine, Launch's; each started rank
// adds one goroutine that waits for it.
type job struct {
	cfg     Config
	log     *slog.Logger
	srv     jobServer
	out     *output
	slots   []Slot
	ranks   []*rankProc // by rank; nil until started
	exits   chan rankExit
	running int // ranks started and not yet exited

	fails    []failedRank     // ranks failed before the job stopped, in order of exit
	choose   <-chan time.Time // the end of the blame window (or wait); nil unless choosing
	waitedOn bool             // the window ended with only failures that blamed a peer
	early    *ExitError       // the first rank that exited 0 before joining, or nil
	joins    <-chan struct{}  // rendezvous changes, watched while early may strand others

	failure  error     // what stopped the job: the blamed rank, spawn error or interrupt
	frozen   *rankProc // the blamed rank, still running, that stopped answering (blame), or nil
	stopping int       // ranks that were running when the stop began, the frozen one aside
	killed   int       // ranks that needed SIGKILL after the grace period

	elastic *elasticState // nil unless the job is elastic (Config.Elastic)
	done    chan struct{} // closed when watch returns
}

// rankProc is a started rank.
type rankProc struct {
	slot Slot
	proc Process
	out  *rankOutput
	done bool
}

// rankExit is the outcome of one rank's Process.Wait.
type rankExit struct {
	rank int
	err  error
}

func newJob(cfg Config, log *slog.Logger, srv jobServer, out *output, slots []Slot) *job {
	return &job{
		cfg: cfg, log: log, srv: srv, out: out, slots: slots,
		ranks: make([]*rankProc, len(slots)),
		exits: make(chan rankExit, len(slots)+maxAdded),
		done:  make(chan struct{}),
	}
}

// spawnAll starts every rank in order and returns the first spawn error.
// It stops early, without error, when ctx ends (watch reports that).
func (j *job) spawnAll(ctx context.Context, env jobenv.Env, spawnerFor func(string) Spawner) error {
	forward := forwardedEnv(j.cfg.ForwardEnv)
	for _, s := range j.slots {
		if ctx.Err() != nil {
			return nil
		}
		c := Command{
			Argv: j.cfg.Command,
			Env:  append(append([]string(nil), forward...), env.ForSlot(jobenv.Slot(s)).Environ()...),
			Dir:  j.cfg.Dir,
			CPUs: CPUShare{Index: s.LocalRank, Of: s.LocalSize, Bind: j.cfg.BindTo == BindCore},
		}
		if j.cfg.MinNP > 0 {
			c.Env = append(c.Env, jobenv.EnvElasticID+"="+elasticID(s.Host, s.Rank))
		}
		if err := j.spawn(ctx, s, c, len(forward), spawnerFor(s.Host)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// spawn starts the rank of slot s and a goroutine that waits for it. The
// first nForward entries of c.Env are -x variables, logged by name only.
func (j *job) spawn(ctx context.Context, s Slot, c Command, nForward int, sp Spawner) error {
	out, err := j.out.open(s.Rank)
	if err != nil {
		return err
	}
	if j.cfg.Verbose {
		j.log.Info("gorun: spawn", "rank", s.Rank, "host", s.Host, "argv", c.Argv, "dir", c.Dir,
			"env", jobenv.RedactEnviron(c.Env[nForward:]), "forward", forwardNames(c.Env[:nForward]))
	}
	p, err := sp.Spawn(ctx, s, c, out.Stdout, out.Stderr)
	if err != nil {
		_ = out.close()
		return err
	}
	j.ranks[s.Rank] = &rankProc{slot: s, proc: p, out: out}
	j.running++
	go func() { // "rank-<R>-wait": ends when the rank has exited
		j.exits <- rankExit{rank: s.Rank, err: p.Wait()}
	}()
	return nil
}

// watch waits for every started rank to exit. spawnErr, if not nil, is a
// spawn failure that stops the job at once. It returns nil when every rank
// succeeded, else the error that stopped the job. An elastic job that
// waits for hosts (see awaitingHosts) is not over when its last rank
// exits.
//
// A failed rank does not stop the job at once: for up to blameWindow (or
// blameWait) the job gathers the failures that follow it, then stops with
// the one that culprit chooses (a rank that failed on its own, not because
// another rank did).
func (j *job) watch(ctx context.Context, spawnErr error) error {
	defer close(j.done)
	defer func() {
		if j.elastic != nil {
			j.elastic.alive.Stop()
			if j.elastic.stopDiscovery != nil {
				j.elastic.stopDiscovery()
			}
		}
	}()
	var grace, giveUp <-chan time.Time
	var discovered <-chan discovery
	var short, alive <-chan time.Time
	switch {
	case spawnErr != nil:
		grace = j.stop(spawnErr)
	case ctx.Err() != nil: // spawnAll stopped early
		grace = j.stop(interrupted(ctx))
	}
	done := ctx.Done()
	for j.running > 0 || j.awaitingHosts() {
		var cause error
		if e := j.elastic; e != nil && j.failure == nil {
			discovered, short, alive = e.discovered, e.deadline, e.alive.C
		} else {
			discovered, short, alive = nil, nil, nil
		}
		select {
		case d := <-discovered:
			cause = j.rediscover(d)
		case <-alive:
			cause = j.checkAlive()
		case <-short:
			cause = j.waitedTooLong()
		case ex := <-j.exits:
			j.exited(ex)
			cause = j.judge(ex)
		case <-j.choose:
			cause = j.windowEnded()
		case <-j.joins:
			cause = j.stranded()
		case <-done:
			done = nil
			if j.failure == nil {
				cause = interrupted(ctx)
				if len(j.fails) > 0 { // a rank failed before the interrupt
					cause = j.blame()
				}
			}
		case <-grace:
			grace, giveUp = nil, j.killAll()
		case <-giveUp:
			return j.result(fmt.Errorf("%d %s did not exit within %v of SIGKILL", j.running, plural(j.running, "rank"), killWait))
		}
		if cause != nil && j.failure == nil {
			grace = j.stop(cause)
		}
	}
	if j.failure == nil && len(j.fails) > 0 { // every rank ended within the window
		j.stop(j.blame())
	}
	return j.result(nil)
}

// awaitingHosts reports whether an elastic job that has not stopped waits
// for hosts enough for MinNP ranks: it goes on even with no rank running,
// until hosts come back or the elastic timeout ends it.
func (j *job) awaitingHosts() bool {
	return j.elastic != nil && j.failure == nil && j.elastic.deadline != nil
}

// interrupted is the error of a job stopped because ctx ended.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w (%w)", ErrInterrupted, context.Cause(ctx))
}

// exited records the exit of a rank and closes its output.
func (j *job) exited(ex rankExit) {
	r := j.ranks[ex.rank]
	r.done = true
	j.running--
	if err := r.out.close(); err != nil {
		j.log.Warn("gorun: rank output", "rank", ex.rank, "err", err)
	}
	if ex.err != nil && j.failure != nil {
		j.log.Info("gorun: rank stopped", "rank", ex.rank, "host", r.slot.Host, "err", ex.err)
	}
}

// stop begins stopping the job because of cause: it aborts the rendezvous
// and sends SIGTERM to every running rank, SIGKILL to a blamed rank that
// stopped answering (j.frozen; SIGTERM would wait on a stopped process).
// The returned channel fires when the grace period is over.
func (j *job) stop(cause error) <-chan time.Time {
	j.failure = cause
	j.choose, j.joins = nil, nil
	j.stopping = j.running
	j.srv.Abort(strings.TrimPrefix(cause.Error(), "runner: "))
	j.log.Info("gorun: stopping the job", "cause", cause, "running", j.running)
	if r := j.frozen; r != nil && !r.done {
		j.stopping--
		j.log.Info("gorun: killing the rank that stopped answering", "rank", r.slot.Rank, "host", r.slot.Host)
		if err := r.proc.Kill(); err != nil {
			j.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
		}
	}
	for _, r := range j.live() {
		if r == j.frozen {
			continue
		}
		if err := r.proc.Signal(syscall.SIGTERM); err != nil {
			j.log.Info("gorun: SIGTERM", "rank", r.slot.Rank, "err", err)
		}
	}
	return time.After(j.cfg.GracePeriod)
}

// killAll sends SIGKILL to every rank still running. The returned channel
// fires when Launch stops waiting for them.
func (j *job) killAll() <-chan time.Time {
	for _, r := range j.live() {
		if r == j.frozen { // killed when the stop began; not gone yet
			if err := r.proc.Kill(); err != nil {
				j.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
			}
			continue
		}
		j.killed++
		j.log.Info("gorun: rank did not stop in time; killing it", "rank", r.slot.Rank, "grace", j.cfg.GracePeriod)
		if err := r.proc.Kill(); err != nil {
			j.log.Warn("gorun: SIGKILL", "rank", r.slot.Rank, "err", err)
		}
	}
	return time.After(killWait)
}

// live returns the ranks started and not yet exited.
func (j *job) live() []*rankProc {
	var rs []*rankProc
	for _, r := range j.ranks {
		if r != nil && !r.done {
			rs = append(rs, r)
		}
	}
	return rs
}

// result is Launch's error: nil for a successful job, else the cause with
// what was done about the other ranks. stuck, if not nil, says that some
// ranks could not be confirmed gone.
func (j *job) result(stuck error) error {
	if j.failure == nil {
		return nil
	}
	var what string
	if j.frozen != nil {
		what = "killed it"
	}
	switch {
	case j.stopping == 0 && stuck == nil && what == "":
		return j.failure
	case j.stopping == 0 && what != "": // the frozen rank was the only one running
	case errors.Is(j.failure, ErrInterrupted):
		what = fmt.Sprintf("stopped %d running %s", j.stopping, plural(j.stopping, "rank"))
	case j.stopping == 1:
		what = join(what, "stopped the other rank")
	default:
		what = join(what, fmt.Sprintf("stopped the other %d ranks", j.stopping))
	}
	if j.killed > 0 {
		what += fmt.Sprintf(" (%d with SIGKILL after the %v grace period)", j.killed, j.cfg.GracePeriod)
	}
	if stuck != nil {
		return fmt.Errorf("%w; %s; %w", j.failure, what, stuck)
	}
	return fmt.Errorf("%w; %s", j.failure, what)
}

// join joins two parts of Launch's error with "; ", either of which may
// be empty.
func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// plural returns word, with an "s" unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
