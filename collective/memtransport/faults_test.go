package memtransport_test

import (
	"context"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
)

// TestBreakLink checks that both ends of a broken link fail at once, queued
// data included, while other links carry on.
func TestBreakLink(t *testing.T) {
	net := memtransport.NewNetwork(3)
	defer net.Close()
	c01, c10 := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	send(t, c01, tag(1, 0), []byte("lost"))
	pending := recvAsync(context.Background(), c01, tag(1, 0), 1)
	if err := net.BreakLink(0, 1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, await(t, pending), collective.ErrPeerGone)
	wantErr(t, c10.Recv(context.Background(), tag(1, 0), make([]byte, 4)), collective.ErrPeerGone)
	wantErr(t, c10.Send(context.Background(), tag(1, 0), nil), collective.ErrPeerGone)
	send(t, net.Transport(0).Conn(2), tag(1, 0), []byte("ok"))
	recv(t, net.Transport(2).Conn(0), tag(1, 0), 2)
}

// TestDropPeer checks that a dropped rank's own pending calls and its
// peers' calls fail, while links between the others carry on.
func TestDropPeer(t *testing.T) {
	net := memtransport.NewNetwork(3)
	defer net.Close()
	own := recvAsync(context.Background(), net.Transport(1).Conn(2), tag(1, 0), 1)
	peer := recvAsync(context.Background(), net.Transport(0).Conn(1), tag(1, 0), 1)
	if err := net.DropPeer(1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, await(t, own), collective.ErrPeerGone)
	wantErr(t, await(t, peer), collective.ErrPeerGone)
	send(t, net.Transport(2).Conn(0), tag(1, 0), []byte("ok"))
	recv(t, net.Transport(0).Conn(2), tag(1, 0), 2)
}

// TestCloseAfterBreak checks that Close replaces an earlier failure: calls
// on a closed transport always say ErrClosed.
func TestCloseAfterBreak(t *testing.T) {
	net := memtransport.NewNetwork(2)
	net.BreakLink(0, 1)
	net.Close()
	wantErr(t, net.Transport(0).Conn(1).Recv(context.Background(), tag(1, 0), nil), collective.ErrClosed)
}

// TestSetDelay checks that a delayed message arrives no sooner than its
// delay and that later, faster messages do not overtake it.
func TestSetDelay(t *testing.T) {
	const d = 50 * time.Millisecond
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	net.SetDelay(0, 1, d)
	start := time.Now()
	send(t, a, tag(1, 0), []byte("slow"))
	net.SetDelay(0, 1, 0)
	send(t, a, tag(1, 1), []byte("fast"))
	recv(t, b, tag(1, 0), 4)
	recv(t, b, tag(1, 1), 4)
	if el := time.Since(start); el < d {
		t.Errorf("delayed message arrived after %v, want >= %v", el, d)
	}
}

// TestSetDelayOneWay checks that a delay holds one direction only.
func TestSetDelayOneWay(t *testing.T) {
	net := memtransport.NewNetwork(2)
	defer net.Close()
	a, b := net.Transport(0).Conn(1), net.Transport(1).Conn(0)
	net.SetDelay(0, 1, time.Hour)
	send(t, a, tag(1, 0), []byte("slow"))
	send(t, b, tag(1, 0), []byte("back"))
	if err := await(t, recvAsync(context.Background(), a, tag(1, 0), 4)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	wantErr(t, b.Recv(ctx, tag(1, 0), make([]byte, 4)), context.DeadlineExceeded)
}

// TestFailAfter checks that the n-th Send on the network breaks its link.
func TestFailAfter(t *testing.T) {
	net := memtransport.NewNetwork(3, memtransport.FailAfter(3))
	defer net.Close()
	c01, c02 := net.Transport(0).Conn(1), net.Transport(0).Conn(2)
	send(t, c01, tag(1, 0), nil)
	send(t, c02, tag(1, 0), nil)
	wantErr(t, c01.Send(context.Background(), tag(1, 1), nil), collective.ErrPeerGone)
	wantErr(t, net.Transport(1).Conn(0).Recv(context.Background(), tag(1, 0), nil), collective.ErrPeerGone)
	send(t, c02, tag(1, 1), nil)
	recv(t, net.Transport(2).Conn(0), tag(1, 0), 0)
}

// TestRandomFault checks that a seed fixes the failing message and that
// the failure falls within the range asked for.
func TestRandomFault(t *testing.T) {
	const within = 20
	seen := map[int]bool{}
	for seed := range uint64(10) {
		k := sendsUntilFault(t, memtransport.RandomFault(seed, within))
		if k < 1 || k > within {
			t.Fatalf("seed %d: fault at message %d, want within [1, %d]", seed, k, within)
		}
		if again := sendsUntilFault(t, memtransport.RandomFault(seed, within)); again != k {
			t.Fatalf("seed %d: fault at message %d, then %d", seed, k, again)
		}
		seen[k] = true
	}
	if len(seen) < 2 {
		t.Errorf("10 seeds all failed at the same message: %v", seen)
	}
}

// sendsUntilFault sends on one link of a fresh network until a Send fails
// and returns the number of that Send.
func sendsUntilFault(t *testing.T, opt memtransport.Option) int {
	t.Helper()
	net := memtransport.NewNetwork(2, opt)
	defer net.Close()
	for k := 1; k <= 1000; k++ {
		if err := net.Transport(0).Conn(1).Send(context.Background(), tag(1, uint32(k)), nil); err != nil {
			wantErr(t, err, collective.ErrPeerGone)
			return k
		}
	}
	t.Fatal("no fault in 1000 messages")
	return 0
}
