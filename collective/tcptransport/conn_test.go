package tcptransport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// localMeshT is LocalMesh for tests: it fails t on error and closes the
// transports when t ends.
func localMeshT(t *testing.T, size int) []collective.Transport {
	t.Helper()
	return meshT(t, size, Config{})
}

var tag11 = collective.Tag{Seq: 1, Step: 1}

func TestPeerGoneNamesPeer(t *testing.T) {
	m := localMeshT(t, 2)
	m[0].Close()
	c := m[1].Conn(0)
	err := c.Recv(t.Context(), tag11, make([]byte, 8))
	if !errors.Is(err, collective.ErrPeerGone) || errors.Is(err, collective.ErrClosed) {
		t.Fatalf("err = %v, want ErrPeerGone only", err)
	}
	if !containsAll(err.Error(), "rank 1", "peer 0", m[1].Host(0)) {
		t.Errorf("err = %q, want it to name both ranks and %s", err, m[1].Host(0))
	}
	if again := c.Send(t.Context(), tag11, nil); again == nil || again.Error() != err.Error() {
		t.Errorf("later Send: err = %v, want the first cause %v", again, err)
	}
}

func TestCloseIsLocal(t *testing.T) {
	m := localMeshT(t, 2)
	m[0].Close()
	err := m[0].Conn(1).Send(t.Context(), tag11, make([]byte, 8))
	if !errors.Is(err, collective.ErrClosed) || errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("err = %v, want ErrClosed only", err)
	}
}

func TestProtocolErrorStatesBoth(t *testing.T) {
	m := localMeshT(t, 2)
	if err := m[0].Conn(1).Send(t.Context(), tag11, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	err := m[1].Conn(0).Recv(t.Context(), collective.Tag{Seq: 2, Step: 1}, make([]byte, 9))
	if !errors.Is(err, collective.ErrProtocol) ||
		!strings.Contains(err.Error(), "expected seq 2 step 1 len 9, got seq 1 step 1 len 8") {
		t.Fatalf("err = %v, want a protocol error stating both tags", err)
	}
	// The failed link was closed, so the sender learns at once.
	err = m[0].Conn(1).Recv(t.Context(), tag11, make([]byte, 8))
	if !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("peer after the protocol error: err = %v, want ErrPeerGone", err)
	}
}

// TestMalformedFrame has a fake rank 1 write a header that is not one
// (shared memory off: the fake peer takes no part in its handshake, which
// would fail the link; see TestShmHandshakeBrokenFailsLink).
func TestMalformedFrame(t *testing.T) {
	lns, addrs := listenN(t, 2)
	secret := secretOf(1)
	r0 := start(t, t.Context(), lns[0], Config{Size: 2, Addrs: addrs, Secret: secret, NoSharedMemory: true})
	raw, _, err := fakePeer(t, addrs[0], secret, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r0.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("this is not a frame header, not at all"))
	err = tr.Conn(1).Recv(t.Context(), tag11, make([]byte, 8))
	if !errors.Is(err, collective.ErrProtocol) || !strings.Contains(err.Error(), "bad frame magic") {
		t.Errorf("err = %v, want a protocol error about the magic", err)
	}
}

// TestRawFrame has a fake rank 1 write a frame by hand on its lane 1>0 and
// read rank 0's answer from its lane 0>1, checking the TCP wire layout and
// the lanes from the outside (so shared memory is off: the fake peer does
// not answer its offer).
func TestRawFrame(t *testing.T) {
	lns, addrs := listenN(t, 2)
	secret := secretOf(1)
	r0 := start(t, t.Context(), lns[0], Config{Size: 2, Addrs: addrs, Secret: secret, NoSharedMemory: true})
	out, in, err := fakePeer(t, addrs[0], secret, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r0.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	frame := []byte{'G', 'V', 1, 0, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'}
	out.Write(frame)
	got := make([]byte, 3)
	if err := tr.Conn(1).Recv(t.Context(), collective.Tag{Seq: 9, Step: 5}, got); err != nil || string(got) != "abc" {
		t.Errorf("Recv = %q, %v; want \"abc\"", got, err)
	}
	if err := tr.Conn(1).Send(t.Context(), collective.Tag{Seq: 9, Step: 5}, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, len(frame))
	in.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(in, echo); err != nil || !bytes.Equal(echo, frame) {
		t.Errorf("lane 0>1 carried %q, %v; want %q", echo, err, frame)
	}
}

func TestDeadlineWrapsTimeout(t *testing.T) {
	m := localMeshT(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := m[1].Conn(0).Recv(ctx, tag11, make([]byte, 8))
	if !errors.Is(err, collective.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if !containsAll(err.Error(), "recv from peer 0", m[1].Host(0)) {
		t.Errorf("err = %q, want it to name the operation and peer", err)
	}
}

// TestCancelledBeforeCall: a context that ended before the call touched
// the stream fails the call but not the link.
func TestCancelledBeforeCall(t *testing.T) {
	m := localMeshT(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m[0].Conn(1).Send(ctx, tag11, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send: err = %v, want context.Canceled", err)
	}
	if err := m[1].Conn(0).Recv(ctx, tag11, make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv: err = %v, want context.Canceled", err)
	}
	exchange(t, m[0], m[1])
}

func TestConnInvalidPeer(t *testing.T) {
	m := localMeshT(t, 2)
	for _, peer := range []int{-1, 0, 2} {
		err := m[0].Conn(peer).Send(t.Context(), tag11, nil)
		if !errors.Is(err, collective.ErrInvalid) {
			t.Errorf("Conn(%d).Send: err = %v, want ErrInvalid", peer, err)
		}
	}
	if h := m[0].Host(2); h != "" {
		t.Errorf("Host(2) = %q, want \"\"", h)
	}
}

func TestLocalMeshSizes(t *testing.T) {
	if _, err := LocalMesh(t.Context(), 0, nil); !errors.Is(err, collective.ErrInvalid) {
		t.Errorf("LocalMesh(0): err = %v, want ErrInvalid", err)
	}
	m := localMeshT(t, 1)
	if m[0].Rank() != 0 || m[0].Size() != 1 {
		t.Errorf("size-1 mesh: rank %d size %d", m[0].Rank(), m[0].Size())
	}
	m = localMeshT(t, 5)
	exchange(t, m[4], m[0])
	exchange(t, m[2], m[3])
}
