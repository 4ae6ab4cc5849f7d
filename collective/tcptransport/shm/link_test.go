package shm

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
	"github.com/gorovod/gorovod/internal/testutil"
)

// side is one rank's end of a link between two ranks of this process:
// its lanes, and the connection its Link reports to.
type side struct {
	rank    int
	out, in *net.TCPConn
	failed  atomic.Pointer[error]
	link    *Link
}

func (s *side) Err() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records err unless a cause is recorded, closes the lanes and
// downs the link, as tcptransport's conn does.
func (s *side) fail(err error) error {
	if s.failed.CompareAndSwap(nil, &err) {
		s.out.Close()
		s.in.Close()
		if s.link != nil {
			s.link.Down()
		}
	}
	return s.Err()
}

func (s *side) Gone(op Op, err error) error {
	return s.fail(fmt.Errorf("rank %d, op %d: %w: %w", s.rank, op, collective.ErrPeerGone, err))
}

func (s *side) Corrupt(msg string) error {
	return s.fail(fmt.Errorf("rank %d: %w: %s", s.rank, collective.ErrProtocol, msg))
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// twoRanks returns ranks 0 and 1 with their lanes joined: what one writes
// on out the other reads on in.
func twoRanks(t *testing.T) (*side, *side) {
	a0, b1 := tcpPair(t) // rank 0 > rank 1
	b0, a1 := tcpPair(t) // rank 1 > rank 0
	return &side{rank: 0, out: a0, in: a1}, &side{rank: 1, out: b0, in: b1}
}

// shake runs Handshake on both ranks at once, each with setup (its
// Deadline set here), and returns their rings.
func shake(s0, s1 *side, setup Setup) (*Rings, *Rings) {
	setup.Deadline = time.Now().Add(30 * time.Second)
	var r [2]*Rings
	var wg sync.WaitGroup
	for i, s := range []*side{s0, s1} {
		wg.Go(func() {
			rings, broken := Handshake(setup, []Peer{{Rank: 1 - s.rank, Out: s.out, In: s.in}})
			if broken[0] != nil {
				panic(broken[0]) // the links of these tests are sound
			}
			r[i] = rings[0]
		})
	}
	wg.Wait()
	return r[0], r[1]
}

// TestLinkAlone: two ranks of this process set up a shared-memory link
// with Handshake over loopback lanes and carry frames of up to several
// times the ring through it both ways at once, polling busy and yielding;
// once one rank's connection fails, the other still receives what was
// written before, then finds the peer gone and fails its connection; a
// Send on the unmapped rings returns that failure; both links then end.
// It runs with one processor, where the polls let the process's other
// goroutines run at every look, and with two, where they do so at most
// every shmring.ShareEvery().
func TestLinkAlone(t *testing.T) {
	for _, procs := range []int{1, 2} {
		for _, spin := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprint("procs=", procs, "/spin=", spin), func(t *testing.T) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				linkAlone(t, spin)
			})
		}
	}
}

func linkAlone(t *testing.T, spin time.Duration) {
	s0, s1 := twoRanks(t)
	r0, r1 := shake(s0, s1, Setup{Proc: "/proc", Capacity: func(int) int { return shmring.MinCapacity }})
	if r0 == nil || r1 == nil {
		t.Fatal("the handshake left the link on TCP")
	}
	for _, p := range []struct {
		s *side
		r *Rings
	}{{s0, r0}, {s1, r1}} {
		p.s.link = NewLink(p.s, p.s.in, p.r, spin, 0)
		go p.s.link.Watch()
		if got := p.s.link.poll.Share; got != shmring.ShareEvery() || (got == 0) != (runtime.GOMAXPROCS(0) == 1) {
			t.Errorf("with GOMAXPROCS %d the polls share every %v, want shmring.ShareEvery(): 0 with one processor only", runtime.GOMAXPROCS(0), got)
		}
	}
	defer func() {
		s0.fail(errors.New("test over"))
		s1.fail(errors.New("test over"))
		s0.link.Wait()
		s1.link.Wait()
	}()
	if got, want := s0.link.Buffered(2), shmring.MinCapacity-2*frame.HeaderSize; got != want {
		t.Errorf("Buffered(2) = %d, want %d", got, want)
	}
	sizes := []int{0, 1, frame.HeaderSize, shmring.MinCapacity - 1, shmring.MinCapacity, 3*shmring.MinCapacity + 5, 7}
	payload := func(from, i, n int) []byte {
		return bytes.Repeat([]byte{byte(from*16 + i + 1)}, n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for from, s := range []*side{s0, s1} {
		to := []*side{s0, s1}[1-from]
		wg.Go(func() {
			for i, n := range sizes {
				if err := s.link.Send(collective.Tag{Seq: uint64(i), Step: uint32(from)}, payload(from, i, n)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for i, n := range sizes {
				got := make([]byte, n)
				if err := to.link.Recv(collective.Tag{Seq: uint64(i), Step: uint32(from)}, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, payload(from, i, n)) {
					errs <- fmt.Errorf("frame %d from rank %d differs", i, from)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Rank 1 writes two frames (one of them in parts), then its
	// connection fails.
	if err := s1.link.Send(collective.Tag{Seq: 100}, []byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := s1.link.SendVec(collective.Tag{Seq: 101}, [][]byte{[]byte("ve"), []byte("ct")}); err != nil {
		t.Fatal(err)
	}
	s1.fail(errors.New("rank 1 closed"))
	for deadline := time.Now().Add(10 * time.Second); !s0.link.Gone(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 did not see rank 1 go within 10s")
		}
	}
	got := make([]byte, 4)
	if err := s0.link.Recv(collective.Tag{Seq: 100}, got); err != nil || string(got) != "last" {
		t.Fatalf("the frame written before the peer went: %q, %v", got, err)
	}
	parts := [][]byte{make([]byte, 1), make([]byte, 3)}
	if err := s0.link.RecvVec(collective.Tag{Seq: 101}, parts); err != nil || string(parts[0])+string(parts[1]) != "vect" {
		t.Fatalf("the frame in parts written before the peer went: %q, %v", parts, err)
	}
	if err := s0.link.Recv(collective.Tag{Seq: 102}, got); !errors.Is(err, collective.ErrPeerGone) {
		t.Fatalf("Recv past the last frame: %v, want ErrPeerGone", err)
	}
	if err := s0.Err(); !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("rank 0's connection after the peer went: %v, want failed with ErrPeerGone", err)
	}
	s0.link.Wait() // the watcher unmaps the rings once the connection failed
	if err := s0.link.Send(collective.Tag{Seq: 102}, got); !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("Send once the rings are unmapped: %v, want the connection's ErrPeerGone", err)
	}
}

// TestLinkChecksHeader: a frame whose tag differs from what Recv expects
// fails the connection with ErrProtocol.
func TestLinkChecksHeader(t *testing.T) {
	s0, s1 := twoRanks(t)
	r0, r1 := shake(s0, s1, Setup{Proc: "/proc", Capacity: func(int) int { return shmring.MinCapacity }})
	if r0 == nil || r1 == nil {
		t.Fatal("the handshake left the link on TCP")
	}
	s0.link, s1.link = NewLink(s0, s0.in, r0, 0, 0), NewLink(s1, s1.in, r1, 0, 0)
	go s0.link.Watch()
	go s1.link.Watch()
	if err := s0.link.Send(collective.Tag{Seq: 1, Step: 2}, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	err := s1.link.Recv(collective.Tag{Seq: 1, Step: 3}, make([]byte, 3))
	if !errors.Is(err, collective.ErrProtocol) || !strings.Contains(err.Error(), "expected seq 1 step 3 len 3, got seq 1 step 2 len 3") {
		t.Errorf("Recv of another tag: %v, want ErrProtocol stating both", err)
	}
	s0.fail(errors.New("test over"))
	s1.link.Wait()
	s0.link.Wait()
}

// TestHandshakeStaysOnTCP: where the peer's ring cannot be opened, both
// ranks get no rings, map none, and each says why in one Warn line; where
// a rank's budget is spent, they get none either, logged at Debug only.
func TestHandshakeStaysOnTCP(t *testing.T) {
	before := mappedRings(t)
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s0, s1 := twoRanks(t)
	r0, r1 := shake(s0, s1, Setup{Proc: "/nonexistent/gorovod", Logger: log,
		Capacity: func(int) int { return shmring.MinCapacity }})
	if r0 != nil || r1 != nil {
		t.Error("rings although no offer can be opened")
	}
	out := logs.String()
	for _, peers := range []string{"peers=[0]", "peers=[1]"} {
		if n := strings.Count(out, "level=WARN msg=\"tcptransport: shared memory unavailable, links to peers on this host stay on TCP\" "+peers); n != 1 {
			t.Errorf("%d Warn lines naming %s, want 1; log:\n%s", n, peers, out)
		}
	}
	if !strings.Contains(out, "/nonexistent/gorovod/") {
		t.Errorf("the Warn lines do not give the cause; log:\n%s", out)
	}

	var logs2 testutil.SyncBuffer
	log = slog.New(slog.NewTextHandler(&logs2, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s0, s1 = twoRanks(t)
	budget := func(peer int) int { return map[int]int{1: 0, 0: shmring.MinCapacity}[peer] } // rank 0's is spent
	if r0, r1 = shake(s0, s1, Setup{Proc: "/proc", Logger: log, Capacity: budget}); r0 != nil || r1 != nil {
		t.Error("rings although rank 0 offered none")
	}
	out = logs2.String()
	if strings.Contains(out, "level=WARN") || strings.Count(out, "level=DEBUG msg=\"tcptransport: shared-memory budget spent") != 2 {
		t.Errorf("a spent budget should be logged at Debug by both ranks, and no Warn; log:\n%s", out)
	}
	if n := mappedRings(t); n != before {
		t.Errorf("%d rings mapped after the handshakes, %d before", n, before)
	}
}
