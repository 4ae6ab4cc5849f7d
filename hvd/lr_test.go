package hvd_test

import (
	"testing"

	"github.com/gorovod/gorovod/hvd"
)

func TestWarmupLR(t *testing.T) {
	cases := []struct {
		base       float64
		size       int
		warmup, at float64
		want       float64
	}{
		{0.1, 4, 5, 0, 0.1},
		{0.1, 4, 5, 2.5, 0.25},
		{0.1, 4, 5, 5, 0.4},
		{0.1, 4, 5, 9, 0.4},
		{0.1, 4, 0, 0, 0.4},
		{0.1, 1, 5, 2, 0.1},
		{0.1, 8, 2, -1, 0.1},
		{0.01, 2, 1, 0.5, 0.015},
	}
	for _, c := range cases {
		if got := hvd.WarmupLR(c.base, c.size, c.warmup, c.at); !near(got, c.want, 1e-12) {
			t.Errorf("WarmupLR(%v, %d, %v, %v) = %v, want %v", c.base, c.size, c.warmup, c.at, got, c.want)
		}
	}
}

func TestStepDecayAndSchedule(t *testing.T) {
	ms := []float64{30, 60, 80}
	for _, c := range []struct{ at, want float64 }{{0, 1}, {29.9, 1}, {30, 0.1}, {60, 0.01}, {90, 0.001}} {
		if got := hvd.StepDecayLR(1, ms, 0.1, c.at); !near(got, c.want, 1e-12) {
			t.Errorf("StepDecayLR at %v = %v, want %v", c.at, got, c.want)
		}
	}
	s := hvd.LRSchedule{Base: 0.05, Size: 4, WarmupEpochs: 2, Milestones: []float64{3}, Gamma: 0.5}
	for _, c := range []struct{ at, want float64 }{{0, 0.05}, {1, 0.125}, {2, 0.2}, {2.99, 0.2}, {3, 0.1}} {
		if got := s.At(c.at); !near(got, c.want, 1e-12) {
			t.Errorf("schedule at %v = %v, want %v", c.at, got, c.want)
		}
	}
	if got := (hvd.LRSchedule{Base: 0.3}).At(7); got != 0.3 {
		t.Errorf("zero Size: %v, want the base rate", got)
	}
}

func TestProgress(t *testing.T) {
	for _, c := range []struct {
		e, s, n int
		want    float64
	}{{0, 0, 10, 0}, {2, 5, 10, 2.5}, {1, 3, 0, 1}} {
		if got := hvd.Progress(c.e, c.s, c.n); got != c.want {
			t.Errorf("Progress(%d, %d, %d) = %v, want %v", c.e, c.s, c.n, got, c.want)
		}
	}
}
