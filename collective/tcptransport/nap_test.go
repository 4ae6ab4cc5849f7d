package tcptransport

import (
	"runtime"
	"testing"
)

// TestNaps: a wait naps only where its link has a nap and the process has
// a P besides the one the nap holds, as GOMAXPROCS says at the time.
func TestNaps(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, c := range []struct {
		procs int
		nap   bool
		want  bool
	}{{1, true, false}, {2, true, true}, {4, true, true}, {2, false, false}} {
		runtime.GOMAXPROCS(c.procs)
		nap := tcpNap
		if !c.nap {
			nap = 0
		}
		if got := naps(nap); got != c.want {
			t.Errorf("GOMAXPROCS %d, nap %v: naps %v, want %v", c.procs, nap, got, c.want)
		}
	}
}
