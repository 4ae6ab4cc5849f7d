package runner

import (
	"context"
	"errors"
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

// discoveryInterval is how often the discovery script runs.
var discoveryInterval = time.Second

// elasticState is what an elastic job (Config.Elastic) keeps: the ranks
// of its current generation, the hosts it may use, and its limits. Ranks
// here are launch indexes (the order gorun started the workers in), not
// the ranks of a generation.
type elasticState struct {
	gen      int                  // the latest generation published
	members  []int                // the launch indexes in it, in its rank order
	resets   int                  // generations formed after a failure
	removing map[int]time.Time    // workers gorun stopped (their host left the list, or went silent): since when
	banned   map[string]time.Time // host → end of its cool-down after a failure there
	hosts    []Host               // the hosts available: discovered, or the configured ones
	finished bool                 // a worker finished training: the job is ending, it grows no more
	short    time.Time            // when the job fell below MinNP ranks (zero: it has enough)

	discovered    <-chan discovery // results of the discovery script, or nil
	stopDiscovery func()           // ends the discovery loop and waits for it (its script killed); nil without one
	discoFails    discoveryFailures
	deadline      <-chan time.Time // the end of the wait for MinNP ranks, or nil
	alive         *time.Ticker     // when to look at the members' heartbeats
	beats         map[int]beat     // by launch index: the last heartbeat seen
	env           jobenv.Env
	spawnerFor    func(string) Spawner
	forward       []string
}

// beat is the last change seen of a worker's heartbeat counter (at is its
// start time until the first).
type beat struct {
	value string
	at    time.Time
	seen  bool
}

// discovery is one run of the discovery script.
type discovery struct {
	hosts []Host
	err   error
}

// elasticID is the name of the worker started as launch index rank on
// host: unique for the job's life.
func elasticID(host string, rank int) string { return fmt.Sprintf("%s/%d", host, rank) }

// startElastic publishes the first generation (every started rank, in
// launch order) and starts the discovery loop when there is a script.
func (j *job) startElastic(ctx context.Context, hosts []Host, env jobenv.Env, spawnerFor func(string) Spawner) error {
	j.elastic = &elasticState{removing: map[int]time.Time{}, banned: map[string]time.Time{}, hosts: hosts,
		env: env, spawnerFor: spawnerFor, forward: forwardedEnv(j.cfg.ForwardEnv),
		alive: time.NewTicker(jobenv.HeartbeatInterval), beats: map[int]beat{}}
	for _, r := range j.ranks {
		if r != nil {
			j.elastic.members = append(j.elastic.members, r.slot.Rank)
			j.elastic.beats[r.slot.Rank] = beat{at: time.Now()}
		}
	}
	if j.cfg.DiscoveryScript != "" {
		ch := make(chan discovery)
		j.elastic.discovered = ch
		dctx, cancel := context.WithCancel(ctx)
		ended := make(chan struct{})
		j.elastic.stopDiscovery = func() { cancel(); <-ended }
		go func() { // "elastic-discovery": ends with the job, its script's run killed
			defer close(ended)
			j.discover(dctx, ch)
		}()
	}
	return j.publish()
}

// discover runs the discovery script every discoveryInterval and sends
// each result on ch, until ctx ends or the job is done.
func (j *job) discover(ctx context.Context, ch chan<- discovery) {
	t := time.NewTicker(discoveryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.done:
			return
		case <-t.C:
		}
		hosts, err := DiscoverHosts(ctx, j.cfg.DiscoveryScript, j.cfg.SlotsPerHost)
		select {
		case ch <- discovery{hosts, err}:
		case <-ctx.Done():
			return
		case <-j.done:
			return
		}
	}
}

// publish makes the current members the next generation.
func (j *job) publish() error {
	e := j.elastic
	e.gen++
	g := jobenv.Generation{N: e.gen}
	for _, rank := range e.members {
		h := j.ranks[rank].slot.Host
		g.Members = append(g.Members, jobenv.ElasticMember{ID: elasticID(h, rank), Host: h})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jobenv.PublishGeneration(ctx, j.srv, g); err != nil {
		return fmt.Errorf("runner: publishing generation %d of the elastic job: %w", g.N, err)
	}
	for r, launched := range e.members { // their output shows the rank they have from now on
		j.ranks[launched].out.setRank(r)
	}
	j.log.Info("gorun: elastic job formed", "generation", g.N, "size", len(g.Members), "hosts", hostCounts(j, e.members))
	return nil
}

// hostCounts says how many of ranks run on each host: "a:2,b:1".
func hostCounts(j *job, ranks []int) string {
	n := map[string]int{}
	for _, r := range ranks {
		n[j.ranks[r].slot.Host]++
	}
	var parts []string
	for _, h := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s:%d", h, n[h]))
	}
	return strings.Join(parts, ",")
}

// drop removes launch index rank from the members; it reports whether it
// was one.
func (e *elasticState) drop(rank int) bool {
	at := slices.Index(e.members, rank)
	if at < 0 {
		return false
	}
	e.members = slices.Delete(e.members, at, at+1)
	return true
}

// elasticExit takes in the exit of a worker of an elastic job and returns
// the cause to stop the job with, or nil.
func (j *job) elasticExit(ex rankExit) error {
	e := j.elastic
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
	return j.failed([]int{ex.rank}, ex.err)
}

// failed takes in the failure of members ranks (already dropped), for
// err: their hosts cool down, and the job forms anew without them unless
// a limit says stop.
func (j *job) failed(ranks []int, err error) error {
	e := j.elastic
	for _, r := range ranks {
		e.banned[j.ranks[r].slot.Host] = time.Now().Add(blacklistCooldown)
	}
	if j.cfg.ResetLimit > 0 && e.resets >= j.cfg.ResetLimit {
		return fmt.Errorf("%w; the elastic job was formed anew %d %s already (--reset-limit %d)", err, e.resets, plural(e.resets, "time"), j.cfg.ResetLimit)
	}
	if len(e.members) < j.cfg.MinNP && (j.cfg.DiscoveryScript == "" || e.finished) {
		return fmt.Errorf("%w; %d %s left, fewer than --min-np %d", err, len(e.members), plural(len(e.members), "rank"), j.cfg.MinNP)
	}
	j.log.Warn("gorun: ranks of the elastic job failed; the others go on without them", "ranks", ranks, "hosts", hostCounts(j, ranks),
		"err", err, "left", len(e.members), "hosts_blacklisted_for", blacklistCooldown)
	e.resets++
	return j.rescale(err, true)
}

// checkAlive kills the workers gorun stopped that outlived the grace
// period, and counts as failed the members whose heartbeat counter has
// stood still for jobenv.HeartbeatLimit (their host is cut off, or they
// hang), or that have sent none within the start timeout and that limit:
// they are killed (as far as a cut-off host allows) and the job goes on
// without them.
func (j *job) checkAlive() error {
	e := j.elastic
	now := time.Now()
	for r, since := range e.removing { // stopped with SIGTERM and still there after the grace period
		if now.Sub(since) >= j.cfg.GracePeriod {
			_ = j.ranks[r].proc.Kill()
		}
	}
	var silent []int
	var errs []error
	for _, r := range e.members {
		b := e.beats[r]
		id := elasticID(j.ranks[r].slot.Host, r)
		if v, ok := j.srv.Value(jobenv.AliveKey(id)); ok && (!b.seen || string(v) != b.value) {
			e.beats[r] = beat{value: string(v), at: now, seen: true}
			continue
		}
		limit := jobenv.HeartbeatLimit
		if !b.seen {
			limit += j.cfg.StartTimeout
		}
		if now.Sub(b.at) >= limit {
			silent = append(silent, r)
			hint := ""
			if !b.seen {
				hint = " since it started (does the program train through hvd.RunElastic?)"
			}
			errs = append(errs, fmt.Errorf("runner: rank %d on %s sent no sign of life for %v%s", r, j.ranks[r].slot.Host, now.Sub(b.at).Round(time.Second), hint))
		}
	}
	if len(silent) == 0 {
		return nil
	}
	// A host cut off silences all its ranks; those whose last beat came a
	// little later go with the first, rather than a generation later.
	for _, r := range e.members {
		h, b := j.ranks[r].slot.Host, e.beats[r]
		if !slices.Contains(silent, r) && b.seen && now.Sub(b.at) >= 2*jobenv.HeartbeatInterval &&
			slices.ContainsFunc(silent, func(x int) bool { return j.ranks[x].slot.Host == h }) {
			silent = append(silent, r)
			errs = append(errs, fmt.Errorf("runner: rank %d on %s sent no sign of life for %v either", r, h, now.Sub(b.at).Round(100*time.Millisecond)))
		}
	}
	for _, r := range silent {
		e.drop(r)
		e.removing[r] = now
		_ = j.ranks[r].proc.Kill()
	}
	return j.failed(silent, errors.Join(errs...))
}

// rediscover takes in a run of the discovery script.
func (j *job) rediscover(d discovery) error {
	e := j.elastic
	if d.err != nil {
		e.discoFails.failed(j.log, d.err, time.Now())
		return nil
	}
	e.discoFails.worked(j.log, time.Now())
	e.hosts = d.hosts
	left := false
	for _, r := range slices.Clone(e.members) {
		if h := j.ranks[r].slot.Host; !slices.ContainsFunc(d.hosts, func(x Host) bool { return hostlist.Key(x.Name) == hostlist.Key(h) }) {
			e.drop(r)
			e.removing[r] = time.Now()
			left = true
			j.log.Info("gorun: host left the discovered list; stopping its rank", "rank", r, "host", h)
			_ = j.ranks[r].proc.Signal(syscall.SIGTERM)
		}
	}
	if !left && !j.canGrow() {
		return nil
	}
	return j.rescale(nil, left)
}

// canGrow reports whether the job would start a rank now.
func (j *job) canGrow() bool {
	e := j.elastic
	return !e.finished && len(e.members) < j.maxNP() && len(j.freeSlots(1)) > 0
}

// maxNP is the most ranks the job runs.
func (j *job) maxNP() int {
	if j.cfg.MaxNP > 0 {
		return j.cfg.MaxNP
	}
	return j.cfg.NP
}

// shareOn is the processor share of a worker added on host: the next of
// the host's slots, so that a full host's workers split its processors as
// the first ones did.
func (j *job) shareOn(host string) CPUShare {
	e := j.elastic
	used := 0
	for _, r := range e.members {
		if hostlist.Key(j.ranks[r].slot.Host) == hostlist.Key(host) {
			used++
		}
	}
	for _, h := range e.hosts {
		if hostlist.Key(h.Name) == hostlist.Key(host) && used < h.Slots {
			return CPUShare{Index: used, Of: h.Slots, Bind: j.cfg.BindTo == BindCore}
		}
	}
	return CPUShare{}
}

// freeSlots returns up to n hosts (one entry per slot) where a rank may
// start now: listed, not cooling down after a failure, with a slot free.
func (j *job) freeSlots(n int) []string {
	e := j.elastic
	used := map[string]int{}
	for _, r := range e.members {
		used[hostlist.Key(j.ranks[r].slot.Host)]++
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
func (j *job) rescale(cause error, changed bool) error {
	e := j.elastic
	if !e.finished {
		for _, host := range j.freeSlots(j.maxNP() - len(e.members)) {
			if err := j.spawnElastic(host); err != nil {
				j.log.Warn("gorun: cannot start a rank", "host", host, "err", err)
				e.banned[host] = time.Now().Add(blacklistCooldown)
				continue
			}
			changed = true
		}
	}
	if len(e.members) >= j.cfg.MinNP {
		e.short, e.deadline = time.Time{}, nil
		if !changed {
			return nil
		}
		return j.publish()
	}
	if j.cfg.DiscoveryScript == "" || e.finished {
		return fmt.Errorf("%w; %d %s left, fewer than --min-np %d", cause, len(e.members), plural(len(e.members), "rank"), j.cfg.MinNP)
	}
	if e.short.IsZero() {
		e.short = time.Now()
		e.deadline = time.After(j.elasticTimeout())
		j.log.Warn("gorun: the elastic job has fewer ranks than --min-np; waiting for hosts", "ranks", len(e.members),
			"min_np", j.cfg.MinNP, "timeout", j.elasticTimeout())
	}
	return nil
}

// elasticTimeout is the configured wait for MinNP ranks, or the default.
func (j *job) elasticTimeout() time.Duration {
	if j.cfg.ElasticTimeout > 0 {
		return j.cfg.ElasticTimeout
	}
	return DefaultElasticTimeout
}

// waitedTooLong is the cause that stops a job that stayed below MinNP
// ranks for the elastic timeout.
func (j *job) waitedTooLong() error {
	e := j.elastic
	var seen []string
	now := time.Now()
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
		ErrElasticTimeout, j.elasticTimeout(), j.cfg.MinNP, len(e.members), strings.Join(seen, ", "))
}

// spawnElastic starts a new worker on host and makes it a member.
func (j *job) spawnElastic(host string) error {
	e := j.elastic
	rank := len(j.ranks)
	s := Slot{Host: host, Rank: rank, Size: rank + 1, LocalSize: 1, CrossSize: 1}
	c := Command{
		Argv: j.cfg.Command,
		Env:  append(append(slices.Clone(e.forward), e.env.ForSlot(jobenv.Slot(s)).Environ()...), jobenv.EnvElasticID+"="+elasticID(host, rank)),
		Dir:  j.cfg.Dir,
		CPUs: j.shareOn(host),
	}
	j.ranks = append(j.ranks, nil)
	if err := j.spawn(context.Background(), s, c, len(e.forward), e.spawnerFor(host)); err != nil {
		j.ranks = j.ranks[:rank]
		return err
	}
	e.members = append(e.members, rank)
	e.beats[rank] = beat{at: time.Now()}
	return nil
}
