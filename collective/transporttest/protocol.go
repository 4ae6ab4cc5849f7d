package transporttest

import (
	"testing"

	"github.com/gorovod/gorovod/collective"
)

// mismatch sends an 8-byte message tagged (1, 1) from rank 0 to rank 1 of
// a fresh mesh, receives it on rank 1 with tag want into n bytes, and
// returns the mesh and Recv's error.
func mismatch(t *testing.T, newMesh Factory, want collective.Tag, n int) ([]collective.Transport, error) {
	t.Helper()
	m := mesh(t, newMesh, 2)
	ctx := opContext(t)
	wantNoErr(t, m[0].Conn(1).Send(ctx, tag(1, 1), payload(1, 8)), "Send")
	return m, m[1].Conn(0).Recv(ctx, want, make([]byte, n))
}

// testWrongSeq expects a frame from another operation to be refused.
func testWrongSeq(t *testing.T, newMesh Factory) {
	_, err := mismatch(t, newMesh, tag(2, 1), 8)
	wantErr(t, err, collective.ErrProtocol, "Recv of seq 1 expecting seq 2")
}

// testWrongStep expects a frame from another step to be refused.
func testWrongStep(t *testing.T, newMesh Factory) {
	_, err := mismatch(t, newMesh, tag(1, 0), 8)
	wantErr(t, err, collective.ErrProtocol, "Recv of step 1 expecting step 0")
}

// testWrongLength expects a frame shorter or longer than the buffer to be
// refused, never truncated or padded.
func testWrongLength(t *testing.T, newMesh Factory) {
	for _, n := range []int{0, 7, 9, 1 << 20} {
		_, err := mismatch(t, newMesh, tag(1, 1), n)
		wantErr(t, err, collective.ErrProtocol, "Recv of 8 bytes into a different length")
	}
}

// testStickyAfterProtocolError expects a link that saw a bad frame to stay
// failed: later calls on it return the same cause at once.
func testStickyAfterProtocolError(t *testing.T, newMesh Factory) {
	m, err := mismatch(t, newMesh, tag(2, 1), 8)
	wantErr(t, err, collective.ErrProtocol, "first Recv")
	ctx := opContext(t)
	c := m[1].Conn(0)
	recv := async(func() error { return c.Recv(ctx, tag(1, 1), make([]byte, 8)) })
	wantErr(t, await(t, recv, prompt, "Recv on a failed link"), collective.ErrProtocol, "later Recv")
	send := async(func() error { return c.Send(ctx, tag(1, 2), payload(2, 8)) })
	wantErr(t, await(t, send, prompt, "Send on a failed link"), collective.ErrProtocol, "later Send")
}
