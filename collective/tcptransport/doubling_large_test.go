package tcptransport

import (
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
	"github.com/gorovod/gorovod/kernels"
)

// TestDoublingBeyondBuffering runs recursive-doubling all-reduces of
// buffers larger than a shared-memory ring (4 MiB at these sizes), and on
// TCP larger than loopback's socket buffers, as Options.DoublingBytes
// allows: each step sends the whole buffer while the peer's whole buffer
// comes in and is folded into it. A receive that waited for its own
// step's send to finish, as it once did, waited for ever: the peer's send
// cannot finish either until this rank reads. The sums must be exact
// within allreduceExact's minute.
//
// The inline cases set InlineBytes above the ring too: a plan run inline
// sends before it receives, so the communicator must see from the links'
// Buffered that it cannot run so, and pipeline it.
func TestDoublingBeyondBuffering(t *testing.T) {
	doubling := collective.Options{DoublingBytes: 1 << 30}
	inline := collective.Options{InlineBytes: 1 << 30}
	cases := []struct {
		name  string
		n     int
		cfg   Config
		tun   tuning
		opts  collective.Options
		count int
	}{
		{"shm/n2", 2, Config{}, tuning{remoteMin: -1}, doubling, 3<<20 + 1},
		{"shm/n2/remote", 2, Config{}, tuning{remoteMin: shm.RemoteFloor}, doubling, 3<<20 + 1},
		{"shm/n3", 3, Config{}, tuning{remoteMin: -1}, doubling, 3<<20 + 1},
		{"shm/n4", 4, Config{}, tuning{remoteMin: -1}, doubling, 3<<20 + 1},
		{"shm/n2/inline", 2, Config{}, tuning{remoteMin: -1}, inline, 3<<20 + 1},
		{"shm/n4/inline", 4, Config{}, tuning{remoteMin: -1}, inline, 3<<20 + 1},
		{"tcp/n3", 3, Config{NoSharedMemory: true}, tuning{}, doubling, 12<<20 + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := meshTuned(t, tc.n, tc.cfg, tc.tun)
			cs := make([]*collective.Comm, tc.n)
			for r := range tc.n {
				cs[r] = collective.NewComm(m[r], tc.opts)
			}
			allreduceExact(t, cs, kernels.F32, tc.count)
		})
	}
}

// TestPairInlineBeyondRing runs all-reduces of two ranks over shared
// memory from twice to sixteen times a ring's 4 MiB, which the
// communicator runs inline (each link holds two of their 1 MiB
// messages), back to back with odd lengths and element types, so that
// one operation's last messages are still unread when the next begins:
// every sum must be exact within allreduceExact's minute.
func TestPairInlineBeyondRing(t *testing.T) {
	m := meshTuned(t, 2, Config{}, tuning{remoteMin: -1})
	cs := []*collective.Comm{collective.NewComm(m[0], collective.Options{}), collective.NewComm(m[1], collective.Options{})}
	for _, count := range []int{2<<20 + 3, 16<<20 + 1, 4<<20 - 1} {
		allreduceExact(t, cs, kernels.F32, count)
		allreduceExact(t, cs, kernels.F64, count/2+1)
		allreduceExact(t, cs, kernels.F16, 1000)
	}
}
