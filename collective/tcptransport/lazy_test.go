package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// ringNeighbours is an eager rule: the ranks before and after, around the
// ring.
func ringNeighbours(rank, size int) []int {
	var out []int
	for _, p := range []int{(rank + 1) % size, (rank + size - 1) % size} {
		if p != rank && (len(out) == 0 || out[0] != p) {
			out = append(out, p)
		}
	}
	return out
}

// meshOnDemand forms a local mesh of size ranks whose eager links are
// eager's, closed when t ends.
func meshOnDemand(t *testing.T, size int, base Config, eager func(rank, size int) []int) []collective.Transport {
	t.Helper()
	return meshTuned(t, size, base, tuning{eager: eager})
}

// exchangeAll has every rank send a message to every other and receive
// theirs, all at once, and checks each.
func exchangeAll(t *testing.T, m []collective.Transport, seq uint64, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(m)*len(m))
	for r, tr := range m {
		for p := range m {
			if p == r {
				continue
			}
			wg.Go(func() {
				msg := []byte(fmt.Sprintf("%d>%d %s", r, p, strings.Repeat("x", size)))
				if err := tr.Conn(p).Send(ctx, collective.Tag{Seq: seq}, msg); err != nil {
					errs <- fmt.Errorf("send %d>%d: %w", r, p, err)
				}
			})
			wg.Go(func() {
				want := fmt.Sprintf("%d>%d %s", p, r, strings.Repeat("x", size))
				got := make([]byte, len(want))
				if err := tr.Conn(p).Recv(ctx, collective.Tag{Seq: seq}, got); err != nil {
					errs <- fmt.Errorf("recv %d<%d: %w", r, p, err)
				} else if string(got) != want {
					errs <- fmt.Errorf("recv %d<%d: got %.20q", r, p, got)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestOnDemandLinks: only the eager links form with the mesh; every other
// link forms on its first use, from either end, on shared memory between
// ranks of one host or on TCP, and then carries traffic both ways.
func TestOnDemandLinks(t *testing.T) {
	for _, noShm := range []bool{false, true} {
		want := SharedMemory
		if noShm {
			want = TCP
		}
		m := meshOnDemand(t, 6, Config{NoSharedMemory: noShm}, ringNeighbours)
		for r, tr := range m {
			for p := range m {
				eager := p == (r+1)%6 || p == (r+5)%6
				got := LinkPath(tr, p)
				if p != r && eager && got != want || p != r && !eager && got != NoLink {
					t.Errorf("noShm %v: before use, rank %d's link to %d is %v (eager %v)", noShm, r, p, got, eager)
				}
			}
		}
		exchangeAll(t, m, 1, 100)
		for r, tr := range m {
			for p := range m {
				if got := LinkPath(tr, p); p != r && got != want {
					t.Errorf("noShm %v: after use, rank %d's link to %d is %v, want %v", noShm, r, p, got, want)
				}
			}
		}
		exchangeAll(t, m, 2, 200<<10) // a second round, larger than the smallest ring
	}
}

// TestOnDemandOneSided: a link forms when only one end uses it yet: the
// lower rank's Send calls the higher rank, which dials it, and the message
// waits for the higher rank's Recv; and the other way round.
func TestOnDemandOneSided(t *testing.T) {
	m := meshOnDemand(t, 4, Config{}, func(int, int) []int { return []int{} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, pair := range [][2]int{{0, 3}, {3, 1}} {
		from, to := pair[0], pair[1]
		if err := m[from].Conn(to).Send(ctx, collective.Tag{Seq: 7}, []byte("hello")); err != nil {
			t.Fatalf("%d>%d: Send with no Recv yet: %v", from, to, err)
		}
		got := make([]byte, 5)
		if err := m[to].Conn(from).Recv(ctx, collective.Tag{Seq: 7}, got); err != nil || string(got) != "hello" {
			t.Fatalf("%d>%d: Recv: %q, %v", from, to, got, err)
		}
	}
}

// TestOnDemandPeerGone: a link that cannot form (the peer has closed) ends
// the call at its context's deadline, naming both ranks and the peer's
// address, and leaves the link able to fail again, not stuck.
func TestOnDemandPeerGone(t *testing.T) {
	m := meshOnDemand(t, 3, Config{}, func(int, int) []int { return []int{} })
	m[2].Close()
	for _, from := range []int{0, 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := m[from].Conn(2).Send(ctx, collective.Tag{Seq: 1}, []byte("x"))
		cancel()
		want := fmt.Sprintf("tcptransport: rank %d: the link to rank 2 (%s) did not form", from, m[from].Host(2))
		if err == nil || !errors.Is(err, collective.ErrTimeout) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want a timeout containing %q", from, err, want)
		}
	}
}

// TestOnDemandClose: Close ends a call waiting for a link to form, at
// once, with ErrClosed, and leaves no goroutine behind (TestMain checks).
func TestOnDemandClose(t *testing.T) {
	m := meshOnDemand(t, 3, Config{}, func(int, int) []int { return []int{} })
	m[2].Close() // nobody will answer rank 0's call
	done := make(chan error, 1)
	go func() { done <- m[0].Conn(2).Recv(context.Background(), collective.Tag{Seq: 1}, make([]byte, 1)) }()
	time.Sleep(50 * time.Millisecond)
	m[0].Close()
	select {
	case err := <-done:
		if !errors.Is(err, collective.ErrClosed) {
			t.Errorf("Recv: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv still waiting 5 s after Close")
	}
}

// ringsCreated returns the capacity of the rings tr's rank created (its
// outbound ones), in all.
func ringsCreated(tr collective.Transport) int {
	t := tr.(*transport)
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.conns {
		if c == nil {
			continue
		}
		if l, ok := c.link.(*shm.Link); ok {
			n += l.Buffered(0) // the outbound ring's capacity
		}
	}
	return n
}

// TestShmBudget: whatever the number of ranks on a host, a rank creates
// at most shm.BudgetBytes of rings: the full mesh of 20 ranks shares them
// out (its 19 eager links get 512 KiB rings), and among 48 ranks the links
// formed on demand on top of two eager ones take what is left, smaller and
// smaller, and then stay on TCP.
func TestShmBudget(t *testing.T) {
	m := meshOnDemand(t, 20, Config{}, nil)
	for r, tr := range m {
		if got := ringsCreated(tr); got != 19*(512<<10) {
			t.Errorf("full mesh: rank %d created %d bytes of rings, want 19 × 512 KiB", r, got)
		}
	}
	// Forming about a thousand links at once in one process, with the
	// race detector on a loaded machine, can take longer than the default
	// handshake timeout; this test is about the budget.
	m = meshOnDemand(t, 48, Config{HandshakeTimeout: time.Minute}, ringNeighbours)
	for r, tr := range m {
		if got := ringsCreated(tr); got != 2*shmring.MaxCapacity {
			t.Errorf("eager neighbours: rank %d created %d bytes of rings, want 2 × 4 MiB", r, got)
		}
	}
	exchangeAll(t, m, 1, 10)
	tcp := 0
	for r, tr := range m {
		if got := ringsCreated(tr); got > shm.BudgetBytes {
			t.Errorf("after all-to-all: rank %d created %d bytes of rings, more than %d", r, got, shm.BudgetBytes)
		}
		for p := range m {
			if LinkPath(tr, p) == TCP {
				tcp++
			}
		}
	}
	if tcp == 0 {
		t.Error("after all-to-all among 48 ranks every link is on shared memory: the budget let too much through")
	}
}

// TestOnDemandNeedsListener: with links on demand even the highest rank
// must accept (lower ranks call it), so Connect refuses a nil listener
// there; a full mesh still takes one.
func TestOnDemandNeedsListener(t *testing.T) {
	_, addrs := listenN(t, 2)
	cfg := Config{Rank: 1, Size: 2, Addrs: addrs, Secret: secretOf(1), Eager: []int{}}
	if _, err := Connect(t.Context(), nil, cfg); !errors.Is(err, collective.ErrInvalid) ||
		!strings.Contains(err.Error(), "rank 1 of 2 needs a listener") {
		t.Errorf("on demand, no listener: %v, want ErrInvalid naming the listener", err)
	}
}

// TestOnDemandIntruders: a transport that still accepts (links form on
// demand) drops what is not a real peer after Connect too: garbage, a
// wrong secret, a call from a rank whose link is eager or that is not
// lower, a call from a job of another size; a real call still forms its
// link, and the rejections are logged.
func TestOnDemandIntruders(t *testing.T) {
	logs := &logBuffer{}
	secret := secretOf(3)
	// Rank 0's link to 1 is eager, to 2 on demand.
	eager := func(rank, size int) []int {
		switch rank {
		case 0:
			return []int{1}
		case 1:
			return []int{0}
		}
		return []int{}
	}
	m := meshTuned(t, 3, Config{Secret: secret, Logger: logs.logger(), HandshakeTimeout: 2 * time.Second}, tuning{eager: eager})
	addr := m[1].Host(1)

	garbage, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	garbage.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if err := untilClosed(garbage); err != nil {
		t.Errorf("garbage: the connection was not closed: %v", err)
	}
	garbage.Close()
	for _, c := range []struct {
		name   string
		secret []byte
		hello  []byte
	}{
		{"wrong secret", secretOf(9), callHello(0, 3)},
		{"call for an eager link", secret, callHello(0, 3)},
		{"call from a higher rank", secret, callHello(2, 3)},
		{"call from another job's size", secret, callHello(0, 4)},
	} {
		if _, err := fakeLane(t, addr, c.secret, c.hello); err == nil {
			t.Errorf("%s: acknowledged", c.name)
		}
	}
	// The real thing still works: rank 0 and rank 2 form their link on
	// demand (rank 0 calls rank 2), and rank 1's eager links are intact.
	exchange(t, m[0], m[2])
	exchange(t, m[0], m[1])
	if got := logs.lines("rejected"); len(got) == 0 {
		t.Errorf("no rejection logged; log:\n%s", logs)
	}
}
