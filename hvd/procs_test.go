package hvd

import "testing"

// TestShareOfProcessors: Init divides a host's processors among its ranks,
// at least one each, when the environment does not choose.
func TestShareOfProcessors(t *testing.T) {
	for _, c := range []struct {
		env               string
		cpus, local, want int
	}{
		{"", 2, 2, 1},
		{"", 16, 4, 4},
		{"", 16, 3, 5},
		{"", 2, 1, 0}, // alone on the host: all of it
		{"", 2, 4, 1}, // more ranks than processors: one each
		{"", 3, 4, 1},
		{"2", 2, 2, 0}, // GOMAXPROCS set by the user
		{"", 64, 64, 1},
	} {
		if got := shareOfProcessors(c.env, c.cpus, c.local); got != c.want {
			t.Errorf("shareOfProcessors(%q, %d cpus, %d local) = %d, want %d", c.env, c.cpus, c.local, got, c.want)
		}
	}
}
