package runner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorovod/gorovod/internal/metrics"
	"github.com/gorovod/gorovod/jobenv"
)

// maxAdded bounds the ranks an elastic job can start beyond its first
// ones without a rank's waiting goroutine blocking once the job is over.
const maxAdded = 4096

// jobServer is the part of the rendezvous server that the job uses: it
// aborts the rendezvous when the job stops, reads the ranks' reports of
// why they failed, and sees which ranks have registered.
type jobServer interface {
	registry
	Abort(reason string)
	Value(key string) ([]byte, bool)
	Set(ctx context.Context, key string, value []byte) error
}

// job is a launched set of ranks: it starts them, waits for them, and
// stops them all (escalation) when its controller says what stopped the
// job. It is used by one goroutine, Launch's; each started rank adds one
// goroutine that waits for it. What an exit or another event means is the
// controller's to say: a static job names the rank that failed on its own
// (staticJob), an elastic one forms anew without it (elasticJob).
type job struct {
	cfg     Config
	log     *slog.Logger
	srv     jobServer
	out     *output
	slots   []Slot
	forward []string    // the -x variables, as NAME=value (forwardedEnv)
	ranks   []*rankProc // by rank (an elastic job's: by launch index); nil until started
	exits   chan rankExit
	running int // ranks started and not yet exited

	failure error      // what stopped the job: the blamed rank, spawn error or interrupt
	halt    escalation // how the ranks are being stopped, once failure is set

	metrics *metrics.Store // the ranks' states and the job's events go here; nil: nowhere
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
	procs := len(slots)
	if cfg.Evaluator {
		procs++ // the evaluator's index: len(slots)
	}
	return &job{
		cfg: cfg, log: log, srv: srv, out: out, slots: slots, forward: forwardedEnv(cfg.ForwardEnv),
		ranks: make([]*rankProc, procs),
		exits: make(chan rankExit, procs+maxAdded),
	}
}

// evaluatorIndex is the index of the evaluator (gorun --evaluator) among
// the job's processes: after the ranks; -1 without one.
func (j *job) evaluatorIndex() int {
	if !j.cfg.Evaluator {
		return -1
	}
	return len(j.slots)
}

// spawnAll starts every rank in order and returns the first spawn error.
// It stops early, without error, when ctx ends (watch reports that).
func (j *job) spawnAll(ctx context.Context, env jobenv.Env, spawnerFor func(string) Spawner) error {
	for _, s := range j.slots {
		if ctx.Err() != nil {
			return nil
		}
		c := Command{
			Argv: j.cfg.Command,
			Env:  append(slices.Clone(j.forward), env.ForSlot(jobenv.Slot(s)).Environ()...),
			Dir:  j.cfg.Dir,
			CPUs: CPUShare{Index: s.LocalRank, Of: s.LocalSize, Bind: j.cfg.BindTo == BindCore},
		}
		if j.cfg.MinNP > 0 {
			c.Env = append(append(c.Env, jobenv.EnvElasticID+"="+elasticID(s.Host, s.Rank)), j.metricsRankEnv(s.Rank)...)
		}
		c.Env = append(c.Env, roleEnv(j.cfg)...)
		if err := j.spawn(ctx, s, c, len(j.forward), spawnerFor(s.Host)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	if j.cfg.Evaluator && ctx.Err() == nil {
		if err := j.spawnEvaluator(ctx, env, spawnerFor); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// spawnEvaluator starts the evaluator (gorun --evaluator) on the first
// host: the program once more, not a rank, with the job's knobs, secret
// and host name and GOROVOD_ROLE=evaluator (jobenv.Env.SidecarEnviron).
func (j *job) spawnEvaluator(ctx context.Context, env jobenv.Env, spawnerFor func(string) Spawner) error {
	host := j.slots[0].Host
	s := Slot{Host: host, Rank: j.evaluatorIndex(), LocalSize: 1, CrossSize: 1, Size: len(j.slots)}
	e := env
	e.Hostname = host
	c := Command{
		Argv: j.cfg.Command,
		Env:  append(append(slices.Clone(j.forward), e.SidecarEnviron()...), jobenv.EnvPSServers+"=", jobenv.EnvRole+"="+jobenv.RoleEvaluator),
		Dir:  j.cfg.Dir,
		CPUs: CPUShare{Index: 0, Of: 1},
	}
	if j.metrics != nil { // where its results go besides its output (package evaluator)
		c.Env = append(c.Env, jobenv.EnvMetricsAddr+"="+env.RendezvousAddr, jobenv.EnvMetricsRank+"="+strconv.Itoa(s.Rank))
	}
	return j.spawn(ctx, s, c, len(j.forward), spawnerFor(host))
}

// roleEnv is the part of a rank's environment that says whether the job
// is a parameter-server job: GOROVOD_PS_SERVERS=N (empty in an all-reduce
// job) and GOROVOD_ROLE empty (only the evaluator has one). Both are set,
// empty or not, so that values left in gorun's own environment, which
// local ranks inherit, never reach a rank.
func roleEnv(cfg Config) []string {
	servers := ""
	if cfg.PS > 0 {
		servers = strconv.Itoa(cfg.PS)
	}
	return []string{jobenv.EnvPSServers + "=" + servers, jobenv.EnvRole + "="}
}

// elasticID is the name of the worker started as launch index rank on
// host (GOROVOD_ELASTIC_ID): unique for the job's life.
func elasticID(host string, rank int) string { return fmt.Sprintf("%s/%d", host, rank) }

// spawn starts the rank of slot s and a goroutine that waits for it. The
// first nForward entries of c.Env are -x variables, logged by name only.
func (j *job) spawn(ctx context.Context, s Slot, c Command, nForward int, sp Spawner) error {
	open := j.out.open
	if s.Rank == j.evaluatorIndex() {
		open = func(int) (*rankOutput, error) { return j.out.openEvaluator() }
	}
	out, err := open(s.Rank)
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
	j.rankStarted(s.Rank, s.Host)
	go func() { // "rank-<R>-wait": ends when the rank has exited
		j.exits <- rankExit{rank: s.Rank, err: p.Wait()}
	}()
	return nil
}

// controller says what the events of a running job mean: a rank's exit,
// the time it asked to be woken at, a change it watches. Each returns the
// cause to stop the job with, or nil. watch consults it only while the job
// runs: once the job stops, what is left is to stop the ranks.
type controller interface {
	// exited takes in the exit of a rank (job.ended has recorded it).
	exited(ex rankExit) error
	// due is when tick is to run next; the zero time: never.
	due() time.Time
	// tick runs once due has come; now is the time.
	tick(now time.Time) error
	// wakeup fires when wake is to run; nil: it watches nothing.
	wakeup() <-chan struct{}
	// wake takes in what wakeup announced.
	wake() error
	// settle returns the cause to stop the job with when cause ends it
	// (ctx ended), or when every rank has ended (cause nil; a nil result
	// then is success).
	settle(cause error) error
	// holds reports whether the job goes on with no rank running.
	holds() bool
	// close ends what the controller runs beside the job; watch calls
	// it before it returns.
	close()
}

// watch waits for every started rank to exit (and, while ctl holds the
// job, for more), handing the events to ctl until the job stops, then
// stopping the ranks (escalation). spawnErr, if not nil, is a spawn
// failure that stops the job at once. It returns nil when the job ended
// well, else the error that stopped it.
func (j *job) watch(ctx context.Context, spawnErr error, ctl controller) error {
	defer ctl.close()
	switch {
	case spawnErr != nil:
		j.stop(spawnErr)
	case ctx.Err() != nil: // spawnAll stopped early
		j.stop(interrupted(ctx))
	}
	var ctlAlarm, haltAlarm alarm
	defer ctlAlarm.fired()
	defer haltAlarm.fired()
	done := ctx.Done()
	for j.running > 0 || j.failure == nil && ctl.holds() {
		var wakeup <-chan struct{}
		var ctlDue time.Time
		if j.failure == nil {
			wakeup, ctlDue = ctl.wakeup(), ctl.due()
		}
		var cause error
		select {
		case ex := <-j.exits:
			j.ended(ex)
			if j.failure == nil {
				cause = ctl.exited(ex)
			}
		case now := <-ctlAlarm.at(ctlDue):
			ctlAlarm.fired()
			cause = ctl.tick(now)
		case <-wakeup:
			cause = ctl.wake()
		case <-done:
			done = nil
			if j.failure == nil {
				cause = ctl.settle(interrupted(ctx))
			}
		case now := <-haltAlarm.at(j.halt.due):
			haltAlarm.fired()
			if j.halt.next(j.live(), now) {
				return j.result(fmt.Errorf("%d %s did not exit within %v of SIGKILL", j.running, plural(j.running, "rank"), killWait))
			}
		}
		if cause != nil && j.failure == nil {
			j.stop(cause)
		}
	}
	if j.failure == nil {
		if cause := ctl.settle(nil); cause != nil { // every rank ended within the blame window
			j.stop(cause)
		}
	}
	return j.result(nil)
}

// alarm is a timer for a due time that may change from one turn of a loop
// to the next.
type alarm struct {
	when time.Time
	t    *time.Timer
}

// at returns a channel that receives at when (nil for the zero time),
// setting the timer anew only when when changed.
func (a *alarm) at(when time.Time) <-chan time.Time {
	if when.IsZero() {
		a.fired()
		return nil
	}
	if a.t == nil || !when.Equal(a.when) {
		a.fired()
		a.when, a.t = when, time.NewTimer(time.Until(when))
	}
	return a.t.C
}

// fired forgets the timer, once it fired (or is no longer wanted).
func (a *alarm) fired() {
	if a.t != nil {
		a.t.Stop()
	}
	a.when, a.t = time.Time{}, nil
}

// interrupted is the error of a job stopped because ctx ended.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("%w (%w)", ErrInterrupted, context.Cause(ctx))
}

// ended records the exit of a rank and closes its output.
func (j *job) ended(ex rankExit) {
	r := j.ranks[ex.rank]
	r.done = true
	j.running--
	if err := r.out.close(); err != nil {
		j.log.Warn("gorun: rank output", "rank", ex.rank, "err", err)
	}
	if ex.err != nil && j.failure != nil {
		j.log.Info("gorun: rank stopped", "rank", ex.rank, "host", r.slot.Host, "err", ex.err)
	}
	j.rankEnded(ex.rank, ex.err)
}

// stop begins stopping the job because of cause: it aborts the rendezvous
// and stops the running ranks (escalation). A blamed rank that stopped
// answering (an *UnresponsiveError whose rank has not ended) gets SIGKILL
// at once: SIGTERM would wait on a stopped process.
func (j *job) stop(cause error) {
	j.failure = cause
	j.srv.Abort(strings.TrimPrefix(cause.Error(), "runner: "))
	j.jobEvent("failure", "stopping the job: "+strings.TrimPrefix(cause.Error(), "runner: "))
	j.log.Info("gorun: stopping the job", "cause", cause, "running", j.running)
	var frozen *rankProc
	if u, ok := cause.(*UnresponsiveError); ok && u.Exit == nil {
		frozen = j.ranks[u.Rank]
	}
	j.halt = escalation{grace: j.cfg.GracePeriod, log: j.log}
	j.halt.begin(j.live(), frozen, time.Now())
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
	return j.halt.describe(j.failure, stuck)
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
