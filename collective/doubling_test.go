package collective_test

import (
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// TestDoublingBytes: a flat all-reduce beyond InlineBytes and up to
// DoublingBytes runs recursive doubling (on 4 ranks, rank 0 sends to rank
// 2, which the ring never does), beyond it the ring; twice InlineBytes is
// the default, and a DoublingBytes below InlineBytes counts as
// InlineBytes (so does a negative one). Results are checked on every mesh
// kind (over TCP such a doubling does not run inline, where full socket
// buffers could stall it) and on 3, 4 and 5 ranks, where doubling folds
// the ranks beyond a power of two.
func TestDoublingBytes(t *testing.T) {
	for _, c := range []struct {
		inline, doubling int
		bytes            int // all-reduced, float64
		doubles          bool
	}{
		{256, 0, 256, true},     // inline
		{256, 0, 512, true},     // twice InlineBytes by default
		{256, 0, 520, false},    // past it
		{256, 1024, 1000, true}, // set
		{256, 1024, 1032, false},
		{256, 64, 264, false}, // below InlineBytes: InlineBytes
		{256, -1, 256, true},
		{256, -1, 264, false},
	} {
		t.Run(fmt.Sprintf("inline=%d/doubling=%d/bytes=%d", c.inline, c.doubling, c.bytes), func(t *testing.T) {
			o := collective.Options{SegmentBytes: 64, InlineBytes: c.inline, DoublingBytes: c.doubling}
			if doubled := sendsToRank2(t, 4, o, c.bytes); doubled != c.doubles {
				t.Errorf("rank 0 sent to rank 2: %v, want %v (doubling)", doubled, c.doubles)
			}
		})
	}
	for _, k := range meshtest.Kinds() {
		for _, n := range []int{3, 4, 5} {
			t.Run(fmt.Sprintf("%s/n=%d", k.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, k.Make, n, collective.Options{SegmentBytes: 256, InlineBytes: 1024, DoublingBytes: 16 << 10})
				for _, count := range []int{129, 1000, 2047} { // float32, past the inline size, odd
					allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
					allreduceCase(t, cs, kernels.F64, kernels.Max, count)
				}
				// Of the 6, only 129 float32 fit InlineBytes; over
				// TCP the others must not run inline.
				if in, piped := collective.Runs(cs[0]); k.Name == "tcp" && (in != 1 || piped != 5) {
					t.Errorf("over TCP %d ran inline and %d not, want 1 and 5", in, piped)
				}
			})
		}
	}
}

// TestHalvingBytes: with Options.HalvingBytes a flat all-reduce on a
// power of two ranks above 2 beyond DoublingBytes and up to HalvingBytes
// runs halving-doubling (on 4 ranks rank 0 sends to rank 2, which the ring
// never does), beyond it the ring, and without it (or with a negative
// value) never; on 3 ranks never (rank 0 would send to rank 2 in the
// fold's hand-back, but the ring's rank 0 sends only to rank 1). Results
// are checked on every mesh kind on 3, 4, 5 and 8 ranks.
func TestHalvingBytes(t *testing.T) {
	for _, c := range []struct {
		halving, bytes int // float64
		n              int
		halves         bool
	}{{0, 2000, 4, false}, {4096, 2000, 4, true}, {4096, 4096, 4, true}, {4096, 4104, 4, false}, {4096, 2000, 3, false}, {-1, 2000, 4, false}} {
		t.Run(fmt.Sprintf("halving=%d/bytes=%d/n=%d", c.halving, c.bytes, c.n), func(t *testing.T) {
			o := collective.Options{SegmentBytes: 64, InlineBytes: 256, HalvingBytes: c.halving}
			if halved := sendsToRank2(t, c.n, o, c.bytes); halved != c.halves {
				t.Errorf("rank 0 sent to rank 2: %v, want %v (halving-doubling)", halved, c.halves)
			}
		})
	}
	for _, k := range meshtest.Kinds() {
		for _, n := range []int{3, 4, 5, 8} {
			t.Run(fmt.Sprintf("%s/n=%d", k.Name, n), func(t *testing.T) {
				cs := meshtest.Comms(t, k.Make, n, collective.Options{SegmentBytes: 256, InlineBytes: 512, DoublingBytes: 1024, HalvingBytes: 64 << 10})
				for _, count := range []int{257, 1000, 4099} { // float32, past the doubling size, odd
					allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
					allreduceCase(t, cs, kernels.F64, kernels.Max, count)
				}
			})
		}
	}
}

// TestDoublingExchangeLargeOverTCP: recursive doubling sends and reduces
// the same elements in each round, so on the exchange executor a round
// must not fold what arrives before all of its own send is out. Buffers of
// 2 and 8 MiB on 4 ranks over TCP (more than the sockets buffer, so sends
// go out in parts while data arrives) all-reduce exactly, by recursive
// doubling and by halving-doubling.
func TestDoublingExchangeLargeOverTCP(t *testing.T) {
	for _, o := range []collective.Options{{DoublingBytes: 8 << 20}, {HalvingBytes: 8 << 20}} {
		cs := meshtest.Comms(t, meshtest.TCP, 4, o)
		for _, count := range []int{1 << 19, 1 << 21} {
			allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
		}
	}
}

// sendsToRank2 all-reduces bytes of float64 on n ranks in memory with
// options o, checks the result, and reports whether rank 0 sent anything
// to rank 2 (the ring's rank 0 sends only to rank 1).
func sendsToRank2(t *testing.T, n int, o collective.Options, bytes int) bool {
	t.Helper()
	ts := meshtest.Mem(t, n)
	counted := &countingTransport{Transport: ts[0], peer: 2}
	ts[0] = counted
	cs := make([]*collective.Comm, n)
	for r, tr := range ts {
		cs[r] = collective.NewComm(tr, o)
		defer cs[r].Close()
	}
	allreduceCase(t, cs, kernels.F64, kernels.Sum, bytes/8)
	return counted.sends.Load() > 0
}
