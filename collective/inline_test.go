package collective_test

import (
	"fmt"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/internal/meshtest"
	"github.com/gorovod/gorovod/kernels"
)

// bufferingTransport promises, on every link, to buffer capacity bytes
// less 24 per message (as a shared-memory link does); the in-memory
// transport underneath buffers without limit, so the promise holds.
type bufferingTransport struct {
	collective.Transport
	capacity int
}

func (b bufferingTransport) Conn(peer int) collective.Conn {
	return bufferingConn{b.Transport.Conn(peer), b.capacity}
}

type bufferingConn struct {
	collective.Conn
	capacity int
}

func (b bufferingConn) Buffered(messages int) int { return max(0, b.capacity-24*messages) }

// buffered returns n comms over in-memory links that promise capacity
// (0: links that promise nothing), and with inPlace send messages of 1 MiB
// and up in place (see inPlaceConn).
func buffered(t *testing.T, n, capacity int, inPlace bool) []*collective.Comm {
	ts := meshtest.Mem(t, n)
	cs := make([]*collective.Comm, n)
	for r, tr := range ts {
		switch {
		case inPlace:
			tr = inPlaceTransport{bufferingTransport{tr, capacity}}
		case capacity > 0:
			tr = bufferingTransport{tr, capacity}
		}
		cs[r] = collective.NewComm(tr, collective.Options{})
		t.Cleanup(func() { cs[r].Close() })
	}
	return cs
}

// TestInlineWhenLinksBuffer: an operation past the inline size runs inline
// exactly when every link it sends on buffers twice what it sends there
// (links that cannot tell what they hold unread; see
// TestRingInlineWhenLinksHoldTheLead for those that can), and gives the
// same result either way.
func TestInlineWhenLinksBuffer(t *testing.T) {
	const n, count = 4, 64 << 10 // float32: 256 KiB, past the 32 KiB inline size
	// The ring sends 2(n-1) chunks of count/n elements to the next rank, in
	// messages of at most one segment (1 MiB): 6 messages, 6·16384·4 bytes.
	perLink, msgs := 2*(n-1)*(count/n)*4, 2*(n-1)
	for _, c := range []struct {
		capacity int
		inline   bool
	}{
		{0, false},
		{2*perLink + 2*msgs*24, true},
		{2*perLink + 2*msgs*24 - 1, false},
		{64 << 20, true},
	} {
		t.Run(fmt.Sprint(c.capacity), func(t *testing.T) {
			cs := buffered(t, n, c.capacity, false)
			for range 3 {
				allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
			}
			wantInline(t, cs, 3, c.inline)
		})
	}
}

// wantInline checks that every rank of cs ran its runs operations inline,
// or every one of them pipelined.
func wantInline(t *testing.T, cs []*collective.Comm, runs int, inline bool) {
	t.Helper()
	for r, comm := range cs {
		in, piped := collective.Runs(comm)
		if got := in == runs && piped == 0; got != inline || in+piped != runs {
			t.Errorf("rank %d: %d inline and %d pipelined runs, want inline %v", r, in, piped, inline)
		}
	}
}

// TestInlineShm runs every collective over shared memory at sizes that
// run inline, back to back on odd and even rank counts, so that the last
// messages of one operation are still unread when the next one sends: no
// rank may block for good, and every result must be right.
func TestInlineShm(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cs := meshtest.Comms(t, meshtest.Shm, n, collective.Options{})
			for i := range 4 {
				allreduceCase(t, cs, kernels.F64, kernels.Sum, 160<<10) // 1.25 MiB
				allreduceCase(t, cs, kernels.F32, kernels.Max, 50<<10+i)
				counts := make([]int, n)
				for r := range counts {
					counts[r] = (64<<10)/n + r*1000 // int64 rows: 512 KiB in all
				}
				allgatherCase(t, cs, counts)
				broadcastCase(t, cs, i%n, 900<<10)
			}
			inline := 0
			for _, c := range cs {
				in, _ := collective.Runs(c)
				inline += in
			}
			if inline < 4*4*n {
				t.Errorf("%d operations ran inline on %d ranks, want at least %d", inline, n, 4*4*n)
			}
		})
	}
}

// TestTwoLevelNeverInline: the two-level schedules, which count on sends
// running ahead of receives, run pipelined even over links that would
// buffer them (run step by step they hung on six ranks over shared
// memory), and still give the right result.
func TestTwoLevelNeverInline(t *testing.T) {
	ts := meshtest.Mem(t, 6)
	cs := make([]*collective.Comm, len(ts))
	for r, tr := range ts {
		cs[r] = collective.NewComm(bufferingTransport{tr, 64 << 20}, collective.Options{SegmentBytes: 64, InlineBytes: 256,
			Hosts: []int{3, 3, 1, 1, 2, 2}, Hierarchical: collective.HierarchyOn})
		t.Cleanup(func() { cs[r].Close() })
	}
	allreduceCase(t, cs, kernels.F16, kernels.Sum, 1009)
	allgatherCase(t, cs, []int{300, 301, 302, 303, 304, 305})
	for r, c := range cs {
		if in, piped := collective.Runs(c); in != 0 || piped != 2 {
			t.Errorf("rank %d: %d inline and %d pipelined runs, want 0 and 2", r, in, piped)
		}
	}
}

// TestInlinePairWhenLinksHoldTwoMessages: an all-reduce between two ranks
// too large for the rule of TestInlineWhenLinksBuffer runs inline exactly
// when the link holds two of its largest messages and does not send them
// in place (collective.InPlace); three ranks with the same links keep the
// stricter rule; the result is the same either way.
func TestInlinePairWhenLinksHoldTwoMessages(t *testing.T) {
	const count = 1 << 20 // float32: 4 MiB, two chunks of two 1 MiB segments
	two := 2*(1<<20) + 2*24
	for _, c := range []struct {
		n, capacity int
		inPlace     bool // the links send messages of 1 MiB in place
		inline      bool
	}{
		{2, 0, false, false},
		{2, two, false, true},
		{2, two - 1, false, false},
		{3, two, false, false},
		{3, 64 << 20, false, true},
		{2, 64 << 20, true, true}, // the rule of TestInlineWhenLinksBuffer
		{2, two, true, false},     // remote frames asked for: pipelined
	} {
		t.Run(fmt.Sprintf("n%d/%d/inPlace=%v", c.n, c.capacity, c.inPlace), func(t *testing.T) {
			cs := buffered(t, c.n, c.capacity, c.inPlace)
			for range 3 {
				allreduceCase(t, cs, kernels.F32, kernels.Sum, count)
			}
			wantInline(t, cs, 3, c.inline)
		})
	}
}

// inPlaceConn is a bufferingConn whose SendWait would leave messages of 1
// MiB and up in the sender's memory (see collective.InPlace).
type inPlaceConn struct{ bufferingConn }

func (inPlaceConn) SendsInPlace(n int) bool { return n >= 1<<20 }

type inPlaceTransport struct{ bufferingTransport }

func (b inPlaceTransport) Conn(peer int) collective.Conn {
	return inPlaceConn{bufferingConn{b.Transport.Conn(peer), b.capacity}}
}
