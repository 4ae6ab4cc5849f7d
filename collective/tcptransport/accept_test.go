package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestJunkConnectionsAreSummarised knocks on a forming rank 0 with 200 junk
// connections from this host before rank 1 shows up: each is turned away,
// the log gets a handful of Warn lines at most rather than one per
// connection, one of them counts the rejections after the first, and the
// mesh still forms.
func TestJunkConnectionsAreSummarised(t *testing.T) {
	const junk = 200
	var logs logBuffer
	lns, addrs := listenN(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := Config{Size: 2, Addrs: addrs, Secret: secretOf(1), Logger: logs.logger()}
	r0 := start(t, ctx, lns[0], cfg)
	knock(t, addrs[0], junk)
	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	if _, err := r0.wait(t); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if _, err := r1.wait(t); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if warns := logs.lines("level=WARN"); len(warns) > 5 {
		t.Errorf("%d junk connections made %d Warn lines, want at most 5", junk, len(warns))
	}
	if len(logs.lines("level=WARN", "rejected more connections", "host=127.0.0.1", fmt.Sprintf("count=%d ", junk-1))) != 1 {
		t.Errorf("no Warn line counting the %d rejections after the first; Warn lines:\n%s", junk-1, logs.lines("level=WARN"))
	}
}

// knock opens n connections to addr, 20 at a time, each sending bytes
// that are no handshake and waiting until the other side hangs up (with a
// reset, since it leaves bytes unread).
func knock(t *testing.T, addr string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 20)
	for range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.Write([]byte("GET / HTTP/1.1\r\nHost: gorovod\r\nUser-Agent: port-scanner/1.0\r\nAccept: */*\r\n\r\n"))
			if err := untilClosed(c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("junk connection not closed: %v", err) // a reset is a close too
			}
		})
	}
	wg.Wait()
}

// TestSilentConnectionsBeforeConnect opens 300 silent connections to rank
// 0's data port after Listen and before Connect, as happens while a rank
// waits at the rendezvous: the listener accepts them at once and closes
// each within its hold of the accept, with Connect not yet started,
// rather than leaving them in the kernel's backlog. 300 more, opened just
// before Connect, are handed to it and closed at their handshake
// deadline; the mesh forms, and TestMain finds no goroutine left behind.
func TestSilentConnectionsBeforeConnect(t *testing.T) {
	const (
		silent = 300
		hold   = 300 * time.Millisecond
		bound  = 10 * time.Second // hold or handshake timeout, and room for a loaded machine
	)
	lns := make([]*Listener, 2)
	addrs := make([]string, 2)
	for r := range lns {
		ln, err := listen("127.0.0.1:0", hold, maxEarly)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[r], addrs[r] = ln, ln.Addr()
	}
	if err := closedWithin(dialSilent(t, addrs[0], silent), bound); err != nil {
		t.Fatalf("before Connect: %v", err)
	}
	late := dialSilent(t, addrs[0], silent)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var logs logBuffer
	cfg := Config{Size: 2, Addrs: addrs, Secret: secretOf(5), HandshakeTimeout: time.Second, Logger: logs.logger()}
	r0 := start(t, ctx, lns[0], cfg)
	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	if err := closedWithin(late, bound); err != nil {
		t.Errorf("during Connect: %v", err)
	}
	t0, err := r0.wait(t)
	if err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	t1, err := r1.wait(t)
	if err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	exchange(t, t0, t1)
}

// dialSilent opens n connections to addr that send nothing; they are
// closed when t ends.
func dialSilent(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns
}

// closedWithin waits until the other end closes every one of conns (a read
// returns EOF or a reset) and fails if any is still open after d.
func closedWithin(conns []net.Conn, d time.Duration) error {
	deadline := time.Now().Add(d)
	var open atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(deadline)
			if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		return fmt.Errorf("%d of %d silent connections still open after %s", n, len(conns), d)
	}
	return nil
}

// TestListenerHoldsAtMost: before Connect a listener holds at most its
// limit of connections, closing any beyond it at once; Close closes those
// it holds, and TestMain finds no goroutine or timer left.
func TestListenerHoldsAtMost(t *testing.T) {
	const most = 20
	ln, err := listen("127.0.0.1:0", time.Hour, most)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := dialSilent(t, ln.Addr(), most)
	for wait := time.Now().Add(10 * time.Second); heldCount(ln) < most; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("holds %d of %d connections after 10s", heldCount(ln), most)
		}
	}
	if err := closedWithin(dialSilent(t, ln.Addr(), 5), 10*time.Second); err != nil {
		t.Errorf("beyond the limit: %v", err)
	}
	if held := heldCount(ln); held != most {
		t.Errorf("holds %d connections, want %d", held, most)
	}
	ln.Close()
	if err := closedWithin(conns, 10*time.Second); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// heldCount is how many connections ln holds for Connect.
func heldCount(ln *Listener) int {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return len(ln.early)
}
