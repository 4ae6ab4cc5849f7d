package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/internal/hostlist"
	"github.com/gorovod/gorovod/jobenv"
)

// blacklistCooldown is how long a host where a rank failed gets no new
// ranks.
var blacklistCooldown = 30 * time.Second

// elasticJob is the controller of an elastic job (Config.Elastic): it
// drives the job it wraps, forming it anew whenever its workers change
// (a worker failed, went silent, or its host left the discovered list;
// hosts have room for more), and stops it only when a limit says so. It
// keeps the ranks of its current generation, the hosts it may use, and
// its limits. Ranks here are launch indexes (the order gorun started the
// workers in), not the ranks of a generation.
type elasticJob struct {
	*job

	gen      int                  // the latest generation published
	members  []int                // the launch indexes in it, in its rank order
	resets   int                  // generations formed after a failure
	removing map[int]time.Time    // workers gorun stopped (their host left the list, or went silent): since when
	banned   map[string]time.Time // host → end of its cool-down after a failure there
	hosts    []Host               // the hosts available: discovered, or the configured ones
	finished bool                 // a worker finished training: the job is ending, it grows no more
	short    time.Time            // when the job fell below MinNP ranks (zero: it has enough)

	disco      *discoverer // runs the discovery script, or nil
	discoFails discoveryFailures
	alive      *heartbeats // the members' heartbeats
	env        jobenv.Env
	spawnerFor func(string) Spawner
}

// startElastic makes j elastic: it publishes the first generation (every
// started rank, in launch order) and starts the discovery loop when there
// is a script. The controller comes back even with an error, for watch to
// close.
func startElastic(ctx context.Context, j *job, hosts []Host, env jobenv.Env, spawnerFor func(string) Spawner) (*elasticJob, error) {
	now := time.Now()
	e := &elasticJob{job: j, removing: map[int]time.Time{}, banned: map[string]time.Time{}, hosts: hosts,
		env: env, spawnerFor: spawnerFor,
		alive: newHeartbeats(j.srv.Value, j.cfg.StartTimeout, now)}
	for _, r := range j.ranks {
		if r != nil {
			e.members = append(e.members, r.slot.Rank)
			e.alive.started(r.slot.Rank, now)
		}
	}
	if j.cfg.DiscoveryScript != "" {
		e.disco = startDiscoverer(ctx, j.cfg.DiscoveryScript, j.cfg.SlotsPerHost)
	}
	return e, e.publish()
}

// due is the next look at the heartbeats, or the end of the wait for
// MinNP ranks if that comes first.
func (e *elasticJob) due() time.Time {
	if d := e.deadline(); !d.IsZero() && d.Before(e.alive.next) {
		return d
	}
	return e.alive.next
}

// deadline is the end of the wait for MinNP ranks, or zero when the job
// has enough.
func (e *elasticJob) deadline() time.Time {
	if e.short.IsZero() {
		return time.Time{}
	}
	return e.short.Add(e.elasticTimeout())
}

// tick stops the job that waited too long for MinNP ranks, and looks at
// the heartbeats when that is due.
func (e *elasticJob) tick(now time.Time) error {
	if d := e.deadline(); !d.IsZero() && !now.Before(d) {
		return e.waitedTooLong(now)
	}
	if now.Before(e.alive.next) {
		return nil
	}
	return e.checkAlive(now)
}

// wakeup fires when a run of the discovery script has ended.
func (e *elasticJob) wakeup() <-chan struct{} {
	if e.disco == nil {
		return nil
	}
	return e.disco.ready
}

// wake takes in a run of the discovery script.
func (e *elasticJob) wake() error { return e.rediscover(e.disco.take()) }

// settle returns cause: an elastic job has no verdict to give.
func (e *elasticJob) settle(cause error) error { return cause }

// holds reports whether the job, not stopped, waits for hosts enough for
// MinNP ranks: it goes on even with no rank running, until hosts come back
// or the elastic timeout ends it.
func (e *elasticJob) holds() bool { return !e.short.IsZero() }

// close ends the discovery loop and waits for it (its script killed).
func (e *elasticJob) close() {
	if e.disco != nil {
		e.disco.stop()
	}
}

// publish makes the current members the next generation.
func (e *elasticJob) publish() error {
	e.gen++
	g := jobenv.Generation{N: e.gen}
	for _, rank := range e.members {
		h := e.ranks[rank].slot.Host
		g.Members = append(g.Members, jobenv.ElasticMember{ID: elasticID(h, rank), Host: h})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jobenv.PublishGeneration(ctx, e.srv, g); err != nil {
		return fmt.Errorf("runner: publishing generation %d of the elastic job: %w", g.N, err)
	}
	for r, launched := range e.members { // their output shows the rank they have from now on
		e.ranks[launched].out.setRank(r)
	}
	e.log.Info("gorun: elastic job formed", "generation", g.N, "size", len(g.Members), "hosts", e.hostCounts(e.members))
	if g.N > 1 {
		e.jobEvent("reformed", fmt.Sprintf("generation %d: %d ranks (%s)", g.N, len(g.Members), e.hostCounts(e.members)))
	}
	return nil
}

// hostCounts says how many of ranks run on each host: "a:2,b:1".
func (e *elasticJob) hostCounts(ranks []int) string {
	n := map[string]int{}
	for _, r := range ranks {
		n[e.ranks[r].slot.Host]++
	}
	var parts []string
	for _, h := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s:%d", h, n[h]))
	}
	return strings.Join(parts, ",")
}

// drop removes launch index rank from the members; it reports whether it
// was one.
func (e *elasticJob) drop(rank int) bool {
	at := slices.Index(e.members, rank)
	if at < 0 {
		return false
	}
	e.members = slices.Delete(e.members, at, at+1)
	return true
}

// exited takes in the exit of a worker and returns the cause to stop the
// job with, or nil.
func (e *elasticJob) exited(ex rankExit) error {
	switch {
	case !e.removing[ex.rank].IsZero(): // stopped by gorun, however it exited
		delete(e.removing, ex.rank)
		return nil
	case ex.err == nil: // done training; the others finish too
		e.finished = true
		e.drop(ex.rank)
		return nil
	case !e.drop(ex.rank): // not a member any more
		return nil
	}
	return e.failed([]int{ex.rank}, ex.err)
}

// failed takes in the failure of members ranks (already dropped), for
// err: their hosts cool down, and the job forms anew without them unless
// a limit says stop.
func (e *elasticJob) failed(ranks []int, err error) error {
	for _, r := range ranks {
		e.banned[e.ranks[r].slot.Host] = time.Now().Add(blacklistCooldown)
	}
	if e.cfg.ResetLimit > 0 && e.resets >= e.cfg.ResetLimit {
		return fmt.Errorf("%w; the elastic job was formed anew %d %s already (--reset-limit %d)", err, e.resets, plural(e.resets, "time"), e.cfg.ResetLimit)
	}
	if len(e.members) < e.cfg.MinNP && (e.cfg.DiscoveryScript == "" || e.finished) {
		return fmt.Errorf("%w; %d %s left, fewer than --min-np %d", err, len(e.members), plural(len(e.members), "rank"), e.cfg.MinNP)
	}
	e.log.Warn("gorun: ranks of the elastic job failed; the others go on without them", "ranks", ranks, "hosts", e.hostCounts(ranks),
		"err", err, "left", len(e.members), "hosts_blacklisted_for", blacklistCooldown)
	e.resets++
	return e.rescale(err, true)
}

// checkAlive kills the workers gorun stopped that outlived the grace
// period, and counts as failed the members that went silent (see
// heartbeats): they are killed (as far as a cut-off host allows) and the
// job goes on without them.
func (e *elasticJob) checkAlive(now time.Time) error {
	for r, since := range e.removing { // stopped with SIGTERM and still there after the grace period
		if now.Sub(since) >= e.cfg.GracePeriod {
			_ = e.ranks[r].proc.Kill()
		}
	}
	silent, why := e.alive.look(e.members, func(r int) string { return e.ranks[r].slot.Host }, now)
	if len(silent) == 0 {
		return nil
	}
	for _, r := range silent {
		e.drop(r)
		e.removing[r] = now
		_ = e.ranks[r].proc.Kill()
	}
	return e.failed(silent, why)
}

// rediscover takes in a run of the discovery script.
func (e *elasticJob) rediscover(d discovery) error {
	if d.err != nil {
		e.discoFails.failed(e.log, d.err, time.Now())
		return nil
	}
	e.discoFails.worked(e.log, time.Now())
	e.hosts = d.hosts
	left := false
	for _, r := range slices.Clone(e.members) {
		if h := e.ranks[r].slot.Host; !slices.ContainsFunc(d.hosts, func(x Host) bool { return hostlist.Key(x.Name) == hostlist.Key(h) }) {
			e.drop(r)
			e.removing[r] = time.Now()
			left = true
			e.log.Info("gorun: host left the discovered list; stopping its rank", "rank", r, "host", h)
			_ = e.ranks[r].proc.Signal(syscall.SIGTERM)
		}
	}
	if !left && !e.canGrow() {
		return nil
	}
	return e.rescale(nil, left)
}

// canGrow reports whether the job would start a rank now.
func (e *elasticJob) canGrow() bool {
	return !e.finished && len(e.members) < e.maxNP() && len(e.freeSlots(1)) > 0
}

// maxNP is the most ranks the job runs.
func (e *elasticJob) maxNP() int {
	if e.cfg.MaxNP > 0 {
		return e.cfg.MaxNP
	}
	return e.cfg.NP
}

// shareOn is the processor share of a worker added on host: the next of
// the host's slots, so that a full host's workers split its processors as
// the first ones did.
func (e *elasticJob) shareOn(host string) CPUShare {
	used := 0
	for _, r := range e.members {
		if hostlist.Key(e.ranks[r].slot.Host) == hostlist.Key(host) {
			used++
		}
	}
	for _, h := range e.hosts {
		if hostlist.Key(h.Name) == hostlist.Key(host) && used < h.Slots {
			return CPUShare{Index: used, Of: h.Slots, Bind: e.cfg.BindTo == BindCore}
		}
	}
	return CPUShare{}
}

// freeSlots returns up to n hosts (one entry per slot) where a rank may
// start now: listed, not cooling down after a failure, with a slot free.
func (e *elasticJob) freeSlots(n int) []string {
	used := map[string]int{}
	for _, r := range e.members {
		used[hostlist.Key(e.ranks[r].slot.Host)]++
	}
	var out []string
	now := time.Now()
	for _, h := range e.hosts {
		if now.Before(e.banned[h.Name]) {
			continue
		}
		for range h.Slots - used[hostlist.Key(h.Name)] {
			if len(out) == n {
				return out
			}
			out = append(out, h.Name)
		}
	}
	return out
}

// rescale starts ranks where slots are free (up to MaxNP), publishes the
// next generation if the members changed (changed: they did already), and
// watches that at least MinNP ranks are left; cause is the failure that
// led here (nil for growth).
func (e *elasticJob) rescale(cause error, changed bool) error {
	if !e.finished {
		for _, host := range e.freeSlots(e.maxNP() - len(e.members)) {
			if err := e.spawnElastic(host); err != nil {
				e.log.Warn("gorun: cannot start a rank", "host", host, "err", err)
				e.banned[host] = time.Now().Add(blacklistCooldown)
				continue
			}
			changed = true
		}
	}
	if len(e.members) >= e.cfg.MinNP {
		e.short = time.Time{}
		if !changed {
			return nil
		}
		return e.publish()
	}
	if e.cfg.DiscoveryScript == "" || e.finished {
		return fmt.Errorf("%w; %d %s left, fewer than --min-np %d", cause, len(e.members), plural(len(e.members), "rank"), e.cfg.MinNP)
	}
	if e.short.IsZero() {
		e.short = time.Now()
		e.log.Warn("gorun: the elastic job has fewer ranks than --min-np; waiting for hosts", "ranks", len(e.members),
			"min_np", e.cfg.MinNP, "timeout", e.elasticTimeout())
	}
	return nil
}

// elasticTimeout is the configured wait for MinNP ranks, or the default.
func (e *elasticJob) elasticTimeout() time.Duration {
	if e.cfg.ElasticTimeout > 0 {
		return e.cfg.ElasticTimeout
	}
	return DefaultElasticTimeout
}

// waitedTooLong is the cause that stops a job that stayed below MinNP
// ranks for the elastic timeout; now is the time.
func (e *elasticJob) waitedTooLong(now time.Time) error {
	var seen []string
	for _, h := range e.hosts {
		s := h.String()
		if until := e.banned[h.Name]; now.Before(until) {
			s += fmt.Sprintf(" (a rank failed there; no new ranks for %v more)", until.Sub(now).Round(time.Second))
		}
		seen = append(seen, s)
	}
	if len(seen) == 0 {
		seen = []string{"none (no host came back within the timeout)"}
	}
	return fmt.Errorf("%w: waited %v for hosts enough for --min-np %d ranks, has %d; the discovery script's hosts: %s",
		ErrElasticTimeout, e.elasticTimeout(), e.cfg.MinNP, len(e.members), strings.Join(seen, ", "))
}

// spawnElastic starts a new worker on host and makes it a member.
func (e *elasticJob) spawnElastic(host string) error {
	rank := len(e.ranks)
	s := Slot{Host: host, Rank: rank, Size: rank + 1, LocalSize: 1, CrossSize: 1}
	c := Command{
		Argv: e.cfg.Command,
		Env: append(append(append(append(slices.Clone(e.forward), e.env.ForSlot(jobenv.Slot(s)).Environ()...), roleEnv(e.cfg)...),
			jobenv.EnvElasticID+"="+elasticID(host, rank)), e.metricsRankEnv(rank)...),
		Dir:  e.cfg.Dir,
		CPUs: e.shareOn(host),
	}
	e.ranks = append(e.ranks, nil)
	if err := e.spawn(context.Background(), s, c, len(e.forward), e.spawnerFor(host)); err != nil {
		e.ranks = e.ranks[:rank]
		return err
	}
	e.members = append(e.members, rank)
	e.alive.started(rank, time.Now())
	return nil
}
