package tcptransport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/internal/testutil"
)

// logBuffer collects the output of a slog handler written from many
// goroutines.
type logBuffer struct{ testutil.SyncBuffer }

// lines returns the lines logged so far that contain every one of subs.
func (l *logBuffer) lines(subs ...string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if containsAll(line, subs...) {
			out = append(out, line)
		}
	}
	return out
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// secretOf returns a 32-byte secret filled with b.
func secretOf(b byte) []byte { return bytes.Repeat([]byte{b}, auth.SecretSize) }

// listenN opens n loopback listeners; Connect closes those it is given and
// a cleanup closes the rest.
func listenN(t *testing.T, n int) ([]*Listener, []string) {
	t.Helper()
	lns, addrs, err := listenAll(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ln := range lns {
			ln.Close()
		}
	})
	return lns, addrs
}

// pending is a Connect running on its own goroutine.
type pending struct {
	done chan struct{}
	tr   collective.Transport
	err  error
}

// start runs Connect on its own goroutine; the transport it returns is
// closed when t ends.
func start(t *testing.T, ctx context.Context, ln *Listener, cfg Config) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.tr, p.err = Connect(ctx, ln, cfg)
	}()
	t.Cleanup(func() {
		<-p.done
		if p.tr != nil {
			p.tr.Close()
		}
	})
	return p
}

// wait returns Connect's outcome.
func (p *pending) wait(t *testing.T) (collective.Transport, error) {
	t.Helper()
	select {
	case <-p.done:
		return p.tr, p.err
	case <-time.After(30 * time.Second):
		t.Fatal("Connect did not return")
		return nil, nil
	}
}

// fakePeer dials addr (a real rank 0) twice and plays rank of a job of
// size on both lanes: handshake and acknowledgement. out is the lane rank>0
// (frames written there reach rank 0's Recv), in the lane 0>rank. Both raw
// sockets are closed when t ends. It stops at the first lane that fails.
func fakePeer(t *testing.T, addr string, secret []byte, rank, size int) (out, in net.Conn, err error) {
	t.Helper()
	if out, err = fakeLane(t, addr, secret, laneHello(rank, size, rank, 0)); err != nil {
		return out, nil, err
	}
	in, err = fakeLane(t, addr, secret, laneHello(rank, size, 0, rank))
	return out, in, err
}

// fakeLane dials addr and runs the client handshake with hello, then waits
// for the acknowledgement. It returns the raw socket, closed when t ends.
func fakeLane(t *testing.T, addr string, secret, hello []byte) (net.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(5 * time.Second)
	if _, err := auth.Client(c.(*net.TCPConn), secret, hello, deadline); err != nil {
		return c, err
	}
	var ack [1]byte
	c.SetReadDeadline(deadline)
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return c, fmt.Errorf("no acknowledgement: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	return c, nil
}

// untilClosed reads c until the other end closes it (or 5 s pass).
func untilClosed(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	return err
}

// exchange sends one message each way between a and b and checks it.
func exchange(t *testing.T, a, b collective.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msg := []byte("hello over tcp")
	got := make([]byte, len(msg))
	tag := collective.Tag{Seq: 1, Step: 0}
	errc := make(chan error, 1)
	go func() { errc <- a.Conn(b.Rank()).Send(ctx, tag, msg) }()
	if err := b.Conn(a.Rank()).Recv(ctx, tag, got); err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("got %q, want %q", got, msg)
	}
}
