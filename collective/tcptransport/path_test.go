package tcptransport

import (
	"testing"

	"github.com/gorovod/gorovod/collective/memtransport"
)

// TestLinkPath: LinkPath tells a shared-memory link from a TCP one, and
// answers NoLink for the rank itself, peers out of range and transports
// from elsewhere.
func TestLinkPath(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want Path
	}{{Config{}, SharedMemory}, {Config{NoSharedMemory: true}, TCP}} {
		m := meshT(t, 3, c.cfg)
		for r, tr := range m {
			for p := -1; p <= 3; p++ {
				want := c.want
				if p == r || p < 0 || p >= 3 {
					want = NoLink
				}
				if got := LinkPath(tr, p); got != want {
					t.Errorf("%+v: rank %d to %d: %v, want %v", c.cfg, r, p, got, want)
				}
			}
		}
		if d := offPath(m, c.want); d != "" {
			t.Error(d)
		}
	}
	if got := LinkPath(memtransport.NewNetwork(2).Transports()[0], 1); got != NoLink {
		t.Errorf("memtransport link: %v, want %v", got, NoLink)
	}
	for p, want := range map[Path]string{NoLink: "none", TCP: "tcp", SharedMemory: "shm", 7: "none"} {
		if p.String() != want {
			t.Errorf("Path(%d).String() = %q, want %q", int(p), p.String(), want)
		}
	}
}
