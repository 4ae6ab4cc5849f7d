package tcptransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// shmLinks counts the links of tr that run over shared memory.
func shmLinks(tr collective.Transport) int {
	n := 0
	for _, c := range tr.(*transport).conns {
		if c == nil {
			continue
		}
		if _, ok := c.link.(*shm.Link); ok {
			n++
		}
	}
	return n
}

// TestShmUsedOnOneHostAndNameless: a mesh of ranks on one host runs every
// link over shared memory, and every ring is mapped from a file with no
// name in any directory, so that a crash can leak nothing.
func TestShmUsedOnOneHostAndNameless(t *testing.T) {
	m := meshT(t, 3, Config{})
	for r, tr := range m {
		if n := shmLinks(tr); n != 2 {
			t.Errorf("rank %d: %d shared-memory links, want 2", r, n)
		}
	}
	rings, err := ringMappings(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(rings) < 12 { // 3 links, 2 rings each, mapped by both ranks
		t.Errorf("%d rings mapped, want at least 12", len(rings))
	}
	for _, path := range rings {
		if named(path) {
			t.Errorf("a ring is mapped from %s, which has a name", path)
		}
	}
	exchange(t, m[0], m[2])
}

// TestShmOffOrUnavailableFallsBackToTCP: with shared memory turned off, or
// offers that cannot be opened (as from another pid namespace), links stay
// on TCP and work; in the second case each rank says so in one Warn line
// that names every peer and the cause.
func TestShmOffOrUnavailableFallsBackToTCP(t *testing.T) {
	var logs logBuffer
	m := meshT(t, 2, Config{NoSharedMemory: true, Logger: logs.logger()})
	if shmLinks(m[0]) != 0 || shmLinks(m[1]) != 0 {
		t.Error("shared memory used although turned off")
	}
	exchange(t, m[0], m[1])
	if lines := logs.lines("shared memory"); len(lines) != 0 {
		t.Errorf("shared memory turned off, yet logged: %s", lines)
	}

	m = meshTuned(t, 3, Config{Logger: logs.logger()}, tuning{procDir: "/nonexistent/gorovod"})
	for r, tr := range m {
		if shmLinks(tr) != 0 {
			t.Errorf("rank %d: shared memory used although no offer can be opened", r)
		}
	}
	exchange(t, m[0], m[2])
	for r, peers := range []string{"[1 2]", "[0 2]", "[0 1]"} {
		if n := len(logs.lines("level=WARN", fmt.Sprintf("rank=%d", r), "stay on TCP", `peers="`+peers, "/nonexistent/gorovod/")); n != 1 {
			t.Errorf("rank %d: %d Warn lines naming peers %s and the cause, want 1; log:\n%s", r, n, peers, logs.lines())
		}
	}
}

// TestShmNotAcrossHosts: peers whose addresses have different host parts
// (127.0.0.1 and 127.0.0.2, both loopback here) are taken to be on other
// hosts and talk over TCP.
func TestShmNotAcrossHosts(t *testing.T) {
	ln0, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln1, err := Listen("127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	addrs := []string{ln0.Addr(), ln1.Addr()}
	secret := secretOf(7)
	p0 := start(t, t.Context(), ln0, Config{Rank: 0, Size: 2, Addrs: addrs, Secret: secret})
	p1 := start(t, t.Context(), ln1, Config{Rank: 1, Size: 2, Addrs: addrs, Secret: secret})
	a, err := p0.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p1.wait(t)
	if err != nil {
		t.Fatal(err)
	}
	if shmLinks(a) != 0 || shmLinks(b) != 0 {
		t.Error("shared memory between different host addresses")
	}
	exchange(t, a, b)
}

// TestShmStreamsAcrossTheRing sends frames from empty to several times the
// ring's size both ways at once, so that the ring wraps many times and
// writers wait for readers, and checks every byte and tag.
func TestShmStreamsAcrossTheRing(t *testing.T) {
	for _, spin := range []time.Duration{-1, time.Hour} {
		m := meshTuned(t, 2, Config{}, tuning{spin: spin})
		if shmLinks(m[0]) != 1 {
			t.Fatal("the link is not on shared memory")
		}
		sizes := []int{0, 1, 7, frame.HeaderSize, 4 << 10, shmring.Piece + 3, shmring.MaxCapacity - 1, shmring.MaxCapacity, shmring.MaxCapacity + 1, 3*shmring.MaxCapacity + 5, 100}
		payload := func(from, i, n int) []byte {
			b := make([]byte, n)
			rng := rand.New(rand.NewPCG(uint64(from), uint64(i)))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			return b
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for from := range 2 {
			to := 1 - from
			wg.Go(func() {
				for i, n := range sizes {
					if err := m[from].Conn(to).Send(t.Context(), collective.Tag{Seq: uint64(i), Step: uint32(from)}, payload(from, i, n)); err != nil {
						errs <- err
						return
					}
				}
			})
			wg.Go(func() {
				for i, n := range sizes {
					got := make([]byte, n)
					if err := m[to].Conn(from).Recv(t.Context(), collective.Tag{Seq: uint64(i), Step: uint32(from)}, got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, payload(from, i, n)) {
						errs <- errors.New("payload differs")
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("spin %v: %v", spin, err)
		}
	}
}

// TestShmDeliversBeforePeerGone: frames a peer wrote before it closed its
// transport are still received, as over TCP; only then does Recv report
// the peer gone, and a later Send fails too.
func TestShmDeliversBeforePeerGone(t *testing.T) {
	m := meshT(t, 2, Config{})
	for i := range 3 {
		if err := m[0].Conn(1).Send(t.Context(), collective.Tag{Seq: uint64(i)}, []byte{byte(i), 1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	m[0].Close()
	// Read only once rank 1's watcher has seen the close, so that the
	// frames are drained from a ring whose writer is known to be gone.
	l := m[1].(*transport).conns[0].link.(*shm.Link)
	for deadline := time.Now().Add(5 * time.Second); !l.Gone(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 1 did not notice rank 0's close within 5s")
		}
	}
	for i := range 3 {
		got := make([]byte, 3)
		if err := m[1].Conn(0).Recv(t.Context(), collective.Tag{Seq: uint64(i)}, got); err != nil || got[0] != byte(i) {
			t.Fatalf("frame %d: %v, %v", i, got, err)
		}
	}
	err := m[1].Conn(0).Recv(t.Context(), collective.Tag{Seq: 3}, make([]byte, 3))
	if !errors.Is(err, collective.ErrPeerGone) {
		t.Fatalf("Recv past the last frame: %v, want ErrPeerGone", err)
	}
	if err := m[1].Conn(0).Send(t.Context(), collective.Tag{Seq: 3}, nil); !errors.Is(err, collective.ErrPeerGone) {
		t.Errorf("Send after the peer went: %v, want ErrPeerGone", err)
	}
}

// TestShmSenderBlockedByFullRingEndsWhenPeerGoes: a Send waiting for room
// in a full ring ends with ErrPeerGone when the reader closes.
func TestShmSenderBlockedByFullRingEndsWhenPeerGoes(t *testing.T) {
	m := meshT(t, 2, Config{})
	blockedUntilPeerCloses(t, m, "Send of twice the ring", func() error {
		return m[0].Conn(1).Send(t.Context(), collective.Tag{Seq: 1}, make([]byte, 2*shmring.MaxCapacity))
	})
}

// blockedUntilPeerCloses checks that send, rank 0's send to rank 1 of m,
// is still blocked 50 ms in with no reader, and ends with ErrPeerGone
// within 5 s of rank 1's Close.
func blockedUntilPeerCloses(t *testing.T, m []collective.Transport, what string, send func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- send() }()
	select {
	case err := <-done:
		t.Fatalf("%s with no reader returned %v", what, err)
	case <-time.After(50 * time.Millisecond):
	}
	m[1].Close()
	select {
	case err := <-done:
		if !errors.Is(err, collective.ErrPeerGone) {
			t.Errorf("%s: err = %v, want ErrPeerGone", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still blocked 5s after the peer closed", what)
	}
}

// TestBufferedPromise: a shared-memory link promises its ring's capacity
// less the frame headers, a TCP link nothing, and the promise holds: a
// rank sends that much without its peer reading, then the peer reads it.
func TestBufferedPromise(t *testing.T) {
	for _, noShm := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ts, err := LocalMeshConfig(ctx, 2, Config{Secret: bytes.Repeat([]byte{7}, 32), NoSharedMemory: noShm})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		b, ok := ts[0].Conn(1).(collective.Buffered)
		if !ok {
			t.Fatal("conn does not implement collective.Buffered")
		}
		want := shmring.MaxCapacity - 3*frame.HeaderSize
		if noShm {
			want = 0
		}
		if got := b.Buffered(3); got != want {
			t.Errorf("shared memory %v: Buffered(3) = %d, want %d", !noShm, got, want)
		}
		if !noShm {
			msg := make([]byte, want/3)
			sendCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for i := range 3 {
				if err := ts[0].Conn(1).Send(sendCtx, collective.Tag{Seq: 1, Step: uint32(i)}, msg); err != nil {
					t.Fatalf("send %d with nobody reading: %v", i, err)
				}
			}
			for i := range 3 {
				if err := ts[1].Conn(0).Recv(sendCtx, collective.Tag{Seq: 1, Step: uint32(i)}, msg); err != nil {
					t.Fatalf("recv %d: %v", i, err)
				}
			}
			cancel()
		}
		for _, tr := range ts {
			tr.Close()
		}
	}
}
