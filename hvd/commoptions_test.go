package hvd

import (
	"slices"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/settings"
)

// TestCommOptions: the communicator learns each rank's host from the
// rendezvous (hosts numbered in order of first appearance) and the
// hierarchical switch from the knobs; options given in Config win.
func TestCommOptions(t *testing.T) {
	env := jobenv.DefaultEnv()
	env.Size = 4
	for _, tt := range []struct {
		hostOf []string
		knob   settings.Switch
		given  collective.Options
		hosts  []int
		mode   collective.Hierarchy
	}{
		{[]string{"b", "b", "a", "a"}, settings.Auto, collective.Options{}, []int{0, 0, 1, 1}, collective.HierarchyAuto},
		{[]string{"a", "b", "a", "b"}, settings.On, collective.Options{}, []int{0, 1, 0, 1}, collective.HierarchyOn},
		{[]string{"a", "a", "b", "b"}, settings.Off, collective.Options{}, []int{0, 0, 1, 1}, collective.HierarchyOff},
		{nil, settings.On, collective.Options{}, nil, collective.HierarchyOn},
		{[]string{"a", "a", "b", "b"}, settings.On, collective.Options{Hosts: []int{7, 8, 9, 9}, Hierarchical: collective.HierarchyOff},
			[]int{7, 8, 9, 9}, collective.HierarchyOff},
	} {
		e := env
		e.Hierarchical = tt.knob
		r := &Runtime{env: e, hostOf: tt.hostOf}
		got := r.commOptions(tt.given)
		if !slices.Equal(got.Hosts, tt.hosts) || got.Hierarchical != tt.mode {
			t.Errorf("hosts %v, knob %v, given %+v: Hosts %v, Hierarchical %d; want %v, %d",
				tt.hostOf, tt.knob, tt.given, got.Hosts, got.Hierarchical, tt.hosts, tt.mode)
		}
	}
}

// TestHalvingBytesRule: the halving-doubling all-reduce is on only where
// every link is TCP (shared memory off, or no two ranks on one host) and
// there are more than 2 ranks of known hosts; commOptions applies the
// rule.
func TestHalvingBytesRule(t *testing.T) {
	for _, c := range []struct {
		noShm bool
		hosts []int
		want  int
	}{
		{false, []int{0, 1, 2, 3}, collective.DefaultHalvingBytes},
		{false, []int{0, 0, 1, 1}, 0},
		{true, []int{0, 0, 1, 1}, collective.DefaultHalvingBytes},
		{true, []int{0, 0, 0, 0}, collective.DefaultHalvingBytes},
		{false, []int{0, 0, 0, 0}, 0},
		{true, []int{0, 1}, 0},
		{true, nil, 0},
	} {
		if got := halvingBytes(c.noShm, c.hosts); got != c.want {
			t.Errorf("halvingBytes(%v, %v) = %d, want %d", c.noShm, c.hosts, got, c.want)
		}
	}
	// commOptions applies it, unless the options name their own.
	env := jobenv.DefaultEnv()
	env.Size = 4
	r := &Runtime{env: env, hostOf: []string{"a", "b", "c", "d"}}
	if got := r.commOptions(collective.Options{}).HalvingBytes; got != collective.DefaultHalvingBytes {
		t.Errorf("4 ranks on 4 hosts: HalvingBytes %d, want %d", got, collective.DefaultHalvingBytes)
	}
	if got := r.commOptions(collective.Options{HalvingBytes: 99}).HalvingBytes; got != 99 {
		t.Errorf("given HalvingBytes 99: %d", got)
	}
}

// TestSegmentBytesRule: ranks that span more than one host cut their
// messages at collective.DefaultCrossHostSegmentBytes, ranks on one host
// (or of unknown hosts) at the communicator's default; commOptions
// applies it unless the options name their own.
func TestSegmentBytesRule(t *testing.T) {
	for _, c := range []struct {
		hosts []int
		want  int
	}{
		{[]int{0, 1}, collective.DefaultCrossHostSegmentBytes},
		{[]int{0, 0, 1, 1}, collective.DefaultCrossHostSegmentBytes},
		{[]int{1, 1, 1, 0}, collective.DefaultCrossHostSegmentBytes},
		{[]int{0, 0, 0, 0}, 0},
		{[]int{3}, 0},
		{nil, 0},
	} {
		if got := segmentBytes(c.hosts); got != c.want {
			t.Errorf("segmentBytes(%v) = %d, want %d", c.hosts, got, c.want)
		}
	}
	env := jobenv.DefaultEnv()
	env.Size = 2
	two := &Runtime{env: env, hostOf: []string{"a", "b"}}
	if got := two.commOptions(collective.Options{}).SegmentBytes; got != collective.DefaultCrossHostSegmentBytes {
		t.Errorf("2 ranks on 2 hosts: SegmentBytes %d, want %d", got, collective.DefaultCrossHostSegmentBytes)
	}
	if got := two.commOptions(collective.Options{SegmentBytes: 99}).SegmentBytes; got != 99 {
		t.Errorf("given SegmentBytes 99: %d", got)
	}
	one := &Runtime{env: env, hostOf: []string{"a", "a"}}
	if got := one.commOptions(collective.Options{}).SegmentBytes; got != 0 {
		t.Errorf("2 ranks on one host: SegmentBytes %d, want 0 (the default)", got)
	}
}
