package hvd

import "testing"

// TestShareOfProcessors: Init divides a host's processors among its ranks,
// at least two each (one on a host of one), when the environment does not
// choose.
func TestShareOfProcessors(t *testing.T) {
	for _, c := range []struct {
		env               string
		cpus, local, want int
	}{
		{"", 2, 2, 2},
		{"", 16, 4, 4},
		{"", 16, 3, 5},
		{"", 2, 1, 0}, // alone on the host: all of it
		{"", 2, 4, 2}, // more ranks than processors: still two each
		{"", 3, 4, 2},
		{"", 1, 2, 1},  // one processor: one
		{"2", 2, 2, 0}, // GOMAXPROCS set by the user
		{"", 64, 64, 2},
	} {
		if got := shareOfProcessors(c.env, c.cpus, c.local); got != c.want {
			t.Errorf("shareOfProcessors(%q, %d cpus, %d local) = %d, want %d", c.env, c.cpus, c.local, got, c.want)
		}
	}
}
