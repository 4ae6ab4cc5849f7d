package memtransport_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
)

// TestSendCopies checks that Send returns before the peer reads and that the
// caller may overwrite its buffer at once.
func TestSendCopies(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	p := []byte("first")
	send(t, a, tag(1, 0), p)
	copy(p, "XXXXX")
	send(t, a, tag(1, 1), p)
	if got := string(recv(t, b, tag(1, 0), 5)); got != "first" {
		t.Errorf("first message = %q, want %q", got, "first")
	}
	if got := string(recv(t, b, tag(1, 1), 5)); got != "XXXXX" {
		t.Errorf("second message = %q, want %q", got, "XXXXX")
	}
}

// TestQueuedBeforeClose checks that messages sent before a peer closed are
// delivered, and only then ErrPeerGone.
func TestQueuedBeforeClose(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	send(t, a, tag(1, 0), []byte("one"))
	send(t, a, tag(1, 1), []byte("two"))
	net.Transport(0).Close()
	wantErr(t, b.Send(context.Background(), tag(2, 0), nil), collective.ErrPeerGone)
	recv(t, b, tag(1, 0), 3)
	recv(t, b, tag(1, 1), 3)
	for range 2 {
		wantErr(t, b.Recv(context.Background(), tag(1, 2), make([]byte, 3)), collective.ErrPeerGone)
	}
}

// TestMismatchSaysWhat checks that a protocol error states what was expected
// and what came, and that the peer then sees its link gone.
func TestMismatchSaysWhat(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	send(t, a, tag(1, 2), []byte("abc"))
	err := b.Recv(context.Background(), tag(1, 2), make([]byte, 4))
	wantErr(t, err, collective.ErrProtocol)
	for _, want := range []string{"got seq 1 step 2 len 3", "want seq 1 step 2 len 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	wantErr(t, a.Recv(context.Background(), tag(1, 3), nil), collective.ErrPeerGone)
}

// TestCancelFailsLink checks the chosen cancellation semantics: a Recv cut
// short by its context fails the link for good, and the peer sees it gone.
func TestCancelFailsLink(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	ctx, cancel := context.WithCancel(context.Background())
	pending := recvAsync(ctx, b, tag(1, 0), 1)
	cancel()
	wantErr(t, await(t, pending), context.Canceled)
	wantErr(t, b.Recv(context.Background(), tag(1, 0), make([]byte, 1)), context.Canceled)
	wantErr(t, a.Send(context.Background(), tag(1, 0), []byte{1}), collective.ErrPeerGone)
}

// TestInvalidPeer checks that a Conn to oneself or to no rank fails every
// call with ErrInvalid instead of panicking.
func TestInvalidPeer(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	tr := net.Transport(0)
	for _, peer := range []int{-1, 0, 2} {
		c := tr.Conn(peer)
		wantErr(t, c.Send(context.Background(), tag(1, 0), nil), collective.ErrInvalid)
		wantErr(t, c.Recv(context.Background(), tag(1, 0), nil), collective.ErrInvalid)
	}
	if net.Transport(2) != nil || net.Transport(-1) != nil {
		t.Error("Transport out of range is not nil")
	}
	wantErr(t, net.BreakLink(1, 1), collective.ErrInvalid)
	wantErr(t, net.DropPeer(2), collective.ErrInvalid)
	wantErr(t, net.SetDelay(0, 5, 0), collective.ErrInvalid)
}
