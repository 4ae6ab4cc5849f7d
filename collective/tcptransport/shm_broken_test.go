package tcptransport

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// TestShmHandshakeBrokenFailsLink: a peer that takes the shared-memory
// handshake's first step and then says nothing more (the test plays rank 1
// on the raw sockets) makes rank 0's handshake run out of time. Rank 0
// must then fail the link, not keep it on TCP with its streams at an
// unknown place in the handshake (the peer would read a frame's first
// byte as its answer, and rank 0 the peer's answer as a frame): the peer
// finds the link closed, and rank 0's calls on it report the timed-out
// handshake.
func TestShmHandshakeBrokenFailsLink(t *testing.T) {
	secret := secretOf(11)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type result struct {
		tr  collective.Transport
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg := Config{Size: 2, Addrs: []string{ln.Addr(), "127.0.0.1:1"}, Secret: secret, HandshakeTimeout: time.Second}
		tr, err := Connect(ctx, ln, cfg)
		done <- result{tr, err}
	}()
	out, in, err := fakePeer(t, ln.Addr(), secret, 1, 2)
	if err != nil {
		t.Fatalf("forming the link with rank 0: %v", err)
	}
	defer out.Close()
	defer in.Close()
	if _, err := readRawOffer(in); err != nil {
		t.Fatalf("reading rank 0's ring offer: %v", err)
	}
	// Say nothing: rank 0 waits for this side's offer until its deadline.
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("Connect did not return after its handshake ran out of time")
	}
	if res.err != nil {
		t.Fatalf("Connect: %v", res.err)
	}
	defer res.tr.Close()
	err = res.tr.Conn(1).Send(ctx, collective.Tag{Seq: 1}, []byte("frame"))
	if !errors.Is(err, collective.ErrTimeout) || !strings.Contains(err.Error(), "shared-memory handshake") {
		t.Errorf("Send on the link = %v, want the timed-out shared-memory handshake", err)
	}
	in.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(in); err != nil || len(b) != 0 {
		t.Errorf("the peer read %q, %v from rank 0 after the offer; want the link closed and nothing more", b, err)
	}
}
