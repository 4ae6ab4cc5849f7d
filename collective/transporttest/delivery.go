package transporttest

import (
	"testing"
)

// testIdentity checks Rank, Size and Host on meshes of 1 to 4 ranks.
func testIdentity(t *testing.T, newMesh Factory) {
	for size := 1; size <= 4; size++ {
		m := mesh(t, newMesh, size)
		for r, tr := range m {
			if tr.Rank() != r || tr.Size() != size {
				t.Errorf("transport %d of %d: Rank() = %d, Size() = %d", r, size, tr.Rank(), tr.Size())
			}
			for p := range size {
				if p != r && tr.Host(p) == "" {
					t.Errorf("size %d: rank %d: Host(%d) is empty", size, r, p)
				}
				if p != r && tr.Conn(p) == nil {
					t.Errorf("size %d: rank %d: Conn(%d) is nil", size, r, p)
				}
			}
		}
	}
}

// testOrderedSteps sends many small messages of varied length on one link
// and expects them in order: any reordering shows up as a tag mismatch.
func testOrderedSteps(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = i % 37
	}
	runFlows(t, m, flow{from: 0, to: 1, seq: 7, sizes: sizes})
}

// testEmptyMessages sends zero-length messages, from a nil slice and from an
// empty one, between non-empty ones.
func testEmptyMessages(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	runFlows(t, m, flow{from: 1, to: 0, seq: 1, sizes: []int{0, 0, 5, 0}})
	ctx := opContext(t)
	wantNoErr(t, m[0].Conn(1).Send(ctx, tag(2, 0), nil), "Send(nil)")
	wantNoErr(t, m[1].Conn(0).Recv(ctx, tag(2, 0), nil), "Recv(nil)")
}

// testSizes sends 1 B, 4 KiB, 1 MiB and 16 MiB and checks every byte.
func testSizes(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	runFlows(t, m, flow{from: 0, to: 1, seq: 1, sizes: []int{1, 4 << 10, 1 << 20, 16 << 20}})
}

// testBothDirections sends 16 MiB each way at once; a transport whose Send
// waits for its own Recv deadlocks here.
func testBothDirections(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	sizes := []int{16 << 20}
	runFlows(t, m, flow{from: 0, to: 1, seq: 3, sizes: sizes}, flow{from: 1, to: 0, seq: 3, sizes: sizes})
}

// testWaitAndReduce sends with SendWait and receives with RecvReduce
// where the links have them (see collective.Rendezvous and
// collective.ReduceReceiver), both ways at once, at sizes from a byte to
// 16 MiB: what arrives must be what was sent, and neither way may wait
// for the other.
func testWaitAndReduce(t *testing.T, newMesh Factory) {
	m := mesh(t, newMesh, 2)
	sizes := []int{1, 4 << 10, 300<<10 + 7, 1 << 20, 16 << 20, 3 << 20, 5}
	runFlows(t, m, flow{from: 0, to: 1, seq: 4, sizes: sizes, wait: true, reduce: true},
		flow{from: 1, to: 0, seq: 4, sizes: sizes, wait: true, reduce: true})
}

// testAllPairs has every ordered pair of a 4-rank mesh exchange at once.
func testAllPairs(t *testing.T, newMesh Factory) {
	const size = 4
	m := mesh(t, newMesh, size)
	sizes := []int{64 << 10, 1, 0, 300<<10 + 7, 4096, 64 << 10, 13, 1 << 20}
	var flows []flow
	for a := range size {
		for b := range size {
			if a != b {
				flows = append(flows, flow{from: a, to: b, seq: 11, sizes: sizes})
			}
		}
	}
	runFlows(t, m, flows...)
}
