package engine

import (
	"fmt"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/settings"
)

// tuneSetting is one point of the autotuner's search: the knobs it may
// change while the job trains. cache is the response cache's capacity
// (0: off).
type tuneSetting struct {
	fusion int64
	cycle  time.Duration
	hier   collective.Hierarchy
	cache  int
}

// String prints the setting as the log shows it:
// "fusion 64 MiB, cycle 1ms, hierarchical auto, cache on".
func (s tuneSetting) String() string {
	return fmt.Sprintf("fusion %s, cycle %v, hierarchical %s, cache %s",
		mib(s.fusion), s.cycle, hierName(s.hier), onOff(s.cache > 0))
}

// mib prints a byte count in MiB where it is a whole number of them.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

func hierName(h collective.Hierarchy) string {
	switch h {
	case collective.HierarchyAuto:
		return "auto"
	case collective.HierarchyOn:
		return "on"
	case collective.HierarchyOff:
		return "off"
	}
	return fmt.Sprintf("Hierarchy(%d)", uint8(h))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// The autotuner's defaults, in the manner of Horovod's (3 warm-up samples,
// 10 steps per sample, at most 20 samples).
const (
	tuneWarmup    = 3  // steps discarded before the first trial (start-up: allocation, first negotiations)
	tuneSettle    = 1  // steps discarded after each change (the step in which it took effect)
	tuneSteps     = 10 // steps measured per trial
	tuneMaxTrials = 20 // the budget of trials
)

// The candidate grids (see tunePlan).
var (
	tuneFusions = []int64{1 << 20, 4 << 20, 16 << 20, 64 << 20, 128 << 20}
	tuneCycles  = []time.Duration{500 * time.Microsecond, time.Millisecond,
		2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond}
)

// tunePlan is the autotuner's search: where it starts, the values it
// tries on each axis, and how it measures a trial.
//
// The search is coordinate descent over short grids: first the starting
// setting, then every fusion threshold with the rest as they are, the best
// of them kept, then every cycle time, then the hierarchical switch, then
// the cache, each time with the best setting so far; a setting measured
// once is not measured again. Horovod runs Bayesian optimisation (a
// Gaussian process over fusion and cycle time, up to 20 samples) instead.
// Here each knob has a handful of values a factor of 2-5 apart, and one
// sample of ten steps on a busy machine is noisy to a few percent, so a
// model fitted to the samples would mostly fit noise: coordinate descent
// measures every grid value of every knob once, in 14 trials or fewer
// (12 when the configured fusion and cycle are on the grid; within
// Horovod's budget of 20), the same trials in the same order on
// every run (which makes the log easy to read and the tuner easy to
// test), and needs no numerical library. What it misses is an interaction
// between knobs, such as a longer cycle making a larger threshold pay;
// fusion comes first because it matters most, and the cycle time is then
// chosen for the threshold already chosen.
type tunePlan struct {
	base    tuneSetting
	fusions []int64
	cycles  []time.Duration
	hiers   []collective.Hierarchy // nil: not tuned
	caches  []int                  // nil: not tuned
	warmup  int                    // steps discarded before the first trial
	settle  int                    // steps discarded after each change
	steps   int                    // steps measured per trial (at least 1)
	trials  int                    // the most trials, the first included (at least 1)
}

// defaultTunePlan is the plan for an engine configured by cfg over a Comm
// whose algorithms are chosen by hier; layered tells whether its layout
// allows the two-level algorithms. The hierarchical switch is tuned only
// when the layout allows two levels and the Comm's choice is auto (hvd
// gives the Comm the job's --hierarchical-allreduce; the engine keeps no
// copy of its own), and the cache is tried at the configured capacity
// (settings.DefaultCacheCapacity when that is 0) and off.
func defaultTunePlan(cfg Config, hier collective.Hierarchy, layered bool) tunePlan {
	p := tunePlan{
		base: tuneSetting{fusion: max(cfg.FusionThreshold, 0), cycle: cfg.CycleTime,
			hier: hier, cache: max(cfg.CacheCapacity, 0)},
		fusions: tuneFusions, cycles: tuneCycles,
		caches: []int{max(cfg.CacheCapacity, 0), 0},
		warmup: tuneWarmup, settle: tuneSettle, steps: tuneSteps, trials: tuneMaxTrials,
	}
	if p.caches[0] == 0 {
		p.caches[0] = settings.DefaultCacheCapacity
	}
	if layered && hier == collective.HierarchyAuto {
		p.hiers = []collective.Hierarchy{collective.HierarchyAuto, collective.HierarchyOn, collective.HierarchyOff}
	}
	return p
}

// axes lists the plan's axes in search order; each returns s with its i-th
// value.
func (p *tunePlan) axes() []tuneAxis {
	return []tuneAxis{
		{len(p.fusions), func(s tuneSetting, i int) tuneSetting { s.fusion = p.fusions[i]; return s }},
		{len(p.cycles), func(s tuneSetting, i int) tuneSetting { s.cycle = p.cycles[i]; return s }},
		{len(p.hiers), func(s tuneSetting, i int) tuneSetting { s.hier = p.hiers[i]; return s }},
		{len(p.caches), func(s tuneSetting, i int) tuneSetting { s.cache = p.caches[i]; return s }},
	}
}

// tuneAxis is one knob of the search: n values, and how to set the i-th.
type tuneAxis struct {
	n    int
	with func(s tuneSetting, i int) tuneSetting
}

// tuneTrial is one measured setting: the bytes all-reduced in its measured
// steps and how long those steps took.
type tuneTrial struct {
	index   int
	set     tuneSetting
	bytes   int64
	elapsed time.Duration
}

// score is the trial's bytes all-reduced per second of its steps.
func (t tuneTrial) score() float64 {
	if t.elapsed <= 0 {
		return 0
	}
	return float64(t.bytes) / t.elapsed.Seconds()
}

// tuner is the autotuner's search, as a pure state machine: it reads no
// clock and does no I/O. Fed the bytes and the duration of each training
// step taken with the setting it asks for, it measures trials, moves on
// along its plan, and finally keeps the best-scoring setting.
type tuner struct {
	plan   tunePlan
	axes   []tuneAxis
	axis   int // the axis being searched
	next   int // the next value to try on it
	cur    tuneSetting
	skip   int // steps still to discard
	n      int // steps measured in the current trial
	bytes  int64
	spent  time.Duration
	trials []tuneTrial
	best   int // index in trials of the best one
	done   bool
}

// newTuner starts the search of plan with its base setting.
func newTuner(plan tunePlan) *tuner {
	plan.steps, plan.trials = max(plan.steps, 1), max(plan.trials, 1)
	return &tuner{plan: plan, axes: plan.axes(), cur: plan.base, skip: max(plan.warmup, 0)}
}

// setting is the setting the tuner asks for now: the trial's, or once
// done the chosen one.
func (t *tuner) setting() tuneSetting { return t.cur }

// finished reports whether the search is over.
func (t *tuner) finished() bool { return t.done }

// chosen is the best trial so far (the zero trial before the first ends).
func (t *tuner) chosen() tuneTrial {
	if len(t.trials) == 0 {
		return tuneTrial{set: t.plan.base}
	}
	return t.trials[t.best]
}

// step takes one training step, run entirely with setting(), that
// all-reduced bytes in d. It returns the trial that this step completed,
// if any; the tuner then asks for the next setting (or, done, the best).
func (t *tuner) step(bytes int64, d time.Duration) (tuneTrial, bool) {
	if t.done {
		return tuneTrial{}, false
	}
	if t.skip > 0 {
		t.skip--
		return tuneTrial{}, false
	}
	t.bytes += bytes
	t.spent += d
	if t.n++; t.n < t.plan.steps {
		return tuneTrial{}, false
	}
	tr := tuneTrial{index: len(t.trials), set: t.cur, bytes: t.bytes, elapsed: t.spent}
	t.trials = append(t.trials, tr)
	if tr.score() > t.trials[t.best].score() {
		t.best = tr.index
	}
	t.n, t.bytes, t.spent = 0, 0, 0
	t.advance()
	return tr, true
}

// advance moves to the next setting to measure, or ends the search.
func (t *tuner) advance() {
	best := t.trials[t.best].set
	for len(t.trials) < t.plan.trials && t.axis < len(t.axes) {
		ax := t.axes[t.axis]
		if t.next >= ax.n {
			t.axis, t.next = t.axis+1, 0
			continue
		}
		s := ax.with(best, t.next)
		t.next++
		if !t.measured(s) {
			t.cur, t.skip = s, max(t.plan.settle, 0)
			return
		}
	}
	t.cur, t.done = best, true
}

// measured reports whether s has been measured already.
func (t *tuner) measured(s tuneSetting) bool {
	for _, tr := range t.trials {
		if tr.set == s {
			return true
		}
	}
	return false
}

// stepMeter divides the stream of all-reduces that rank 0's negotiator
// decides into training steps, as Horovod's autotuner does: a step ends
// when a name all-reduced earlier in it comes again. Times come from the
// caller.
type stepMeter struct {
	seen  map[string]bool // the names all-reduced in the step in progress
	start time.Time       // when it began
	bytes int64           // the bytes all-reduced in it
}

// maxStepNames bounds the names of one step: a job whose names never
// come again (a counter in every name) gets steps of this many
// all-reduces instead of one step that grows without end.
const maxStepNames = 1 << 14

// add counts an all-reduce of name, of bytes, decided at now. When name
// was already all-reduced in the step in progress, or the step holds
// maxStepNames names, that step ended at now, and add returns its bytes
// and duration; the all-reduce opens the next.
func (m *stepMeter) add(name string, bytes int64, now time.Time) (stepBytes int64, d time.Duration, ended bool) {
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	if m.seen[name] || len(m.seen) >= maxStepNames {
		stepBytes, d, ended = m.bytes, now.Sub(m.start), true
		clear(m.seen)
		m.bytes = 0
	}
	if len(m.seen) == 0 {
		m.start = now
	}
	m.seen[name] = true
	m.bytes += bytes
	return stepBytes, d, ended
}
