package engine

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/settings"
)

// testPlan is the default plan for the default configuration over a
// layout of several hosts, with short measurements.
func testPlan() tunePlan {
	p := defaultTunePlan(DefaultConfig(), collective.HierarchyAuto, true)
	p.warmup, p.settle, p.steps = 2, 1, 3
	return p
}

// fakeScore is a deterministic bytes-per-second landscape whose best point
// along each axis is fusion 16 MiB, cycle 2.5 ms, hierarchical on, cache on.
func fakeScore(s tuneSetting) int64 {
	score := int64(1000)
	score += map[int64]int64{1 << 20: 10, 4 << 20: 20, 16 << 20: 90, 64 << 20: 30, 128 << 20: 5}[s.fusion]
	score += map[time.Duration]int64{500 * time.Microsecond: 1, time.Millisecond: 3,
		2500 * time.Microsecond: 50, 5 * time.Millisecond: 4, 10 * time.Millisecond: 2}[s.cycle]
	score += map[collective.Hierarchy]int64{collective.HierarchyAuto: 5, collective.HierarchyOn: 40}[s.hier]
	if s.cache > 0 {
		score += 7
	}
	return score
}

// runTuner feeds t one-second steps scored by score until it is done and
// returns the trials and the steps it took.
func runTuner(t *testing.T, tu *tuner, score func(tuneSetting) int64) (trials []tuneTrial, steps int) {
	t.Helper()
	for !tu.finished() {
		if steps++; steps > 10000 {
			t.Fatalf("not done after %d steps", steps)
		}
		if tr, ok := tu.step(score(tu.setting()), time.Second); ok {
			trials = append(trials, tr)
		}
	}
	return trials, steps
}

// TestTunerVisitsGrid: from the configured setting, the tuner tries every
// other value of each axis in turn with the best of the axes before, once
// each, discards the warm-up and settling steps, and keeps the best.
func TestTunerVisitsGrid(t *testing.T) {
	p := testPlan()
	tu := newTuner(p)
	if tu.setting() != p.base {
		t.Fatalf("starts with %v, want the configured %v", tu.setting(), p.base)
	}
	trials, steps := runTuner(t, tu, fakeScore)
	var got []string
	for i, tr := range trials {
		if tr.index != i {
			t.Fatalf("trial %d has index %d", i, tr.index)
		}
		if want := 3 * fakeScore(tr.set); tr.bytes != want || tr.elapsed != 3*time.Second {
			t.Fatalf("trial %d (%v): %d bytes in %v, want %d in 3s", i, tr.set, tr.bytes, tr.elapsed, want)
		}
		got = append(got, tr.set.String())
	}
	want := []string{
		"fusion 64 MiB, cycle 1ms, hierarchical auto, cache on",
		"fusion 1 MiB, cycle 1ms, hierarchical auto, cache on",
		"fusion 4 MiB, cycle 1ms, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 1ms, hierarchical auto, cache on",
		"fusion 128 MiB, cycle 1ms, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 500µs, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 2.5ms, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 5ms, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 10ms, hierarchical auto, cache on",
		"fusion 16 MiB, cycle 2.5ms, hierarchical on, cache on",
		"fusion 16 MiB, cycle 2.5ms, hierarchical off, cache on",
		"fusion 16 MiB, cycle 2.5ms, hierarchical on, cache off",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("trials:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if wantSteps := p.warmup + len(want)*p.steps + (len(want)-1)*p.settle; steps != wantSteps {
		t.Errorf("took %d steps, want %d (warm-up, measured, settling)", steps, wantSteps)
	}
	best := tuneSetting{fusion: 16 << 20, cycle: 2500 * time.Microsecond, hier: collective.HierarchyOn, cache: 1024}
	if c := tu.chosen(); c.set != best || c.index != 9 || tu.setting() != best {
		t.Errorf("chose trial %d (%v), asks for %v; want trial 9 (%v)", c.index, c.set, tu.setting(), best)
	}
	if _, ok := tu.step(1, time.Second); ok || tu.setting() != best {
		t.Error("a step after the search changed something")
	}
}

// TestTunerBudget: the search stops after the budget of trials and keeps
// the best one measured.
func TestTunerBudget(t *testing.T) {
	p := testPlan()
	p.trials = 4
	tu := newTuner(p)
	trials, _ := runTuner(t, tu, fakeScore)
	if len(trials) != 4 {
		t.Fatalf("%d trials, want the budget of 4", len(trials))
	}
	if c := tu.chosen(); c.set.fusion != 16<<20 || c.index != 3 {
		t.Errorf("chose trial %d (%v), want trial 3 (fusion 16 MiB)", c.index, c.set)
	}
}

// TestTunerKeepsBaseWhenBest: when the configured setting scores best it
// is kept, and it is not measured twice when an axis comes back to it.
func TestTunerKeepsBaseWhenBest(t *testing.T) {
	p := testPlan()
	tu := newTuner(p)
	trials, _ := runTuner(t, tu, func(s tuneSetting) int64 {
		if s == p.base {
			return 2000
		}
		return 1000
	})
	if c := tu.chosen(); c.index != 0 || tu.setting() != p.base {
		t.Errorf("chose trial %d (%v), want the configured setting", c.index, c.set)
	}
	for _, tr := range trials[1:] {
		if tr.set == p.base {
			t.Errorf("trial %d measured the configured setting again", tr.index)
		}
	}
}

// TestDefaultTunePlan: the hierarchical switch is tuned only where the
// layout allows two levels and nothing forces a choice; the cache is tried
// on (at the default capacity when it was off) and off.
func TestDefaultTunePlan(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		name    string
		knob    settings.Switch
		comm    collective.Hierarchy
		layered bool
		tuned   bool
	}{
		{"two levels possible", settings.Auto, collective.HierarchyAuto, true, true},
		{"one host", settings.Auto, collective.HierarchyAuto, false, false},
		{"knob on", settings.On, collective.HierarchyOn, true, false},
		{"comm forced off", settings.Auto, collective.HierarchyOff, true, false},
	} {
		cfg.Hierarchical = c.knob
		p := defaultTunePlan(cfg, c.comm, c.layered)
		if (p.hiers != nil) != c.tuned || p.base.hier != c.comm {
			t.Errorf("%s: hierarchical candidates %v from %v, want tuned=%v from %v", c.name, p.hiers, p.base.hier, c.tuned, c.comm)
		}
	}
	cfg.CacheCapacity = 0
	if p := defaultTunePlan(cfg, collective.HierarchyAuto, false); p.base.cache != 0 || !slices.Equal(p.caches, []int{settings.DefaultCacheCapacity, 0}) {
		t.Errorf("cache off: base %d, candidates %v", p.base.cache, p.caches)
	}
	tu := newTuner(defaultTunePlan(cfg, collective.HierarchyAuto, false))
	trials, _ := runTuner(t, tu, fakeScore)
	if len(trials) != 1+4+4+1 {
		t.Errorf("one host: %d trials, want 10 (no hierarchical axis)", len(trials))
	}
}

// TestStepMeter: a step ends when a name all-reduced in it comes again.
func TestStepMeter(t *testing.T) {
	var m stepMeter
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type ev struct {
		name  string
		bytes int64
		ms    int
	}
	var got []string
	for _, e := range []ev{{"a", 1, 0}, {"b", 2, 5}, {"c", 4, 9}, {"b", 8, 100}, {"a", 16, 101}, {"c", 32, 130}, {"a", 64, 250}} {
		if b, d, ok := m.add(e.name, e.bytes, at(e.ms)); ok {
			got = append(got, fmt.Sprintf("%d bytes in %v", b, d))
		}
	}
	want := []string{"7 bytes in 100ms", "56 bytes in 150ms"}
	if !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
}

// TestTuneLogCSV: a header, one row per trial, and the chosen one last.
func TestTuneLogCSV(t *testing.T) {
	var buf bytes.Buffer
	l := newTuneLog(&buf)
	a := tuneTrial{index: 0, set: tuneSetting{fusion: 64 << 20, cycle: time.Millisecond, hier: collective.HierarchyAuto, cache: 1024},
		bytes: 3 << 20, elapsed: 1500 * time.Millisecond}
	b := tuneTrial{index: 1, set: tuneSetting{fusion: 1 << 20, cycle: 2500 * time.Microsecond, hier: collective.HierarchyOff},
		bytes: 3 << 20, elapsed: time.Second}
	l.trial(a)
	l.trial(b)
	l.chosen(b)
	if l.err != nil {
		t.Fatal(l.err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"trial", "fusion_bytes", "cycle_ms", "hierarchical", "cache", "bytes", "seconds", "bytes_per_s"},
		{"0", "67108864", "1", "auto", "on", "3145728", "1.500000", "2097152"},
		{"1", "1048576", "2.5", "off", "off", "3145728", "1.000000", "3145728"},
		{"chosen", "1048576", "2.5", "off", "off", "3145728", "1.000000", "3145728"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("log:\n%v\nwant:\n%v", rows, want)
	}
}

// TestStepMeterUniqueNames: names that never come again still make steps,
// of maxStepNames all-reduces each, and the meter stays bounded.
func TestStepMeterUniqueNames(t *testing.T) {
	var m stepMeter
	steps := 0
	for i := range 3*maxStepNames + 5 {
		if _, _, ended := m.add(fmt.Sprintf("grad.%d", i), 4, t0.Add(time.Duration(i)*time.Millisecond)); ended {
			steps++
		}
		if len(m.seen) > maxStepNames {
			t.Fatalf("after %d names the step holds %d", i+1, len(m.seen))
		}
	}
	if steps != 3 {
		t.Fatalf("%d steps ended, want 3", steps)
	}
}
