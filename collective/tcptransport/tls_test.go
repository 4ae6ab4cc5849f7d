package tcptransport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/internal/frame"
	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/kernels"
)

// tlsLinks fails t unless every link of m carries its frames through TLS
// 1.3 sessions, on both lanes.
func tlsLinks(t *testing.T, m []collective.Transport) {
	t.Helper()
	for r, tr := range m {
		for p := range m {
			if p == r {
				continue
			}
			c := tr.(*transport).slots[p].formed.Load()
			if c == nil {
				t.Fatalf("rank %d: no link to %d", r, p)
			}
			for _, s := range []*sock{c.out, c.in} {
				tc, ok := s.tls.(*tls.Conn)
				if !ok || tc.ConnectionState().Version != tls.VersionTLS13 {
					t.Fatalf("rank %d's link to %d: lane stream %T is not a TLS 1.3 session", r, p, s.tls)
				}
			}
			if l, ok := c.link.(*tcpLink); ok && l.sec == nil {
				t.Fatalf("rank %d's link to %d sends in clear", r, p)
			}
		}
	}
}

// TestTLSMeshAllReduces forms a TLS mesh of 3 ranks over TCP and
// all-reduces sizes that take one record, several, and a partial last
// one, checked against the closed-form sum.
func TestTLSMeshAllReduces(t *testing.T) {
	m := meshT(t, 3, Config{NoSharedMemory: true, TLS: true})
	tlsLinks(t, m)
	for _, count := range []int{1, 1000, tlsRecord/4 + 3, 1 << 20} {
		var wg sync.WaitGroup
		errs := make([]error, len(m))
		bufs := make([][]float32, len(m))
		for r := range m {
			bufs[r] = make([]float32, count)
			for i := range bufs[r] {
				bufs[r][i] = float32(r + i%7)
			}
			wg.Go(func() {
				c := collective.NewComm(m[r], collective.Options{})
				errs[r] = collective.Allreduce(t.Context(), c, bufs[r], kernels.Sum, collective.ReduceOptions{})
			})
		}
		wg.Wait()
		for r := range m {
			if errs[r] != nil {
				t.Fatalf("count %d: rank %d: %v", count, r, errs[r])
			}
			for i, v := range bufs[r] {
				if want := float32(0 + 1 + 2 + 3*(i%7)); v != want {
					t.Fatalf("count %d: rank %d: element %d is %v, want %v", count, r, i, v, want)
				}
			}
		}
	}
}

// TestTLSLinksOnDemandAndSharedMemory: with TLS, links formed on first use
// run through TLS too, and links between ranks on one host still take
// shared memory (their handshakes in TLS).
func TestTLSLinksOnDemandAndSharedMemory(t *testing.T) {
	lazy := meshT(t, 3, Config{NoSharedMemory: true, TLS: true, Eager: []int{}})
	exchange(t, lazy[2], lazy[0])
	exchange(t, lazy[1], lazy[0])
	exchange(t, lazy[2], lazy[1])
	tlsLinks(t, lazy)
	shm := meshT(t, 2, Config{TLS: true})
	if got := LinkPath(shm[0], 1); got != SharedMemory {
		t.Fatalf("link on one host with TLS is on %v, want shared memory", got)
	}
	exchange(t, shm[0], shm[1])
	tlsLinks(t, shm) // the lanes that set the rings up are TLS sessions
}

// TestTLSWrongSecretRefused: a TLS peer of another job is refused on both
// sides, by the accepting rank and by the dialing one, before the mesh forms.
func TestTLSWrongSecretRefused(t *testing.T) {
	t.Run("accept", func(t *testing.T) {
		var logs logBuffer
		lns, addrs := listenN(t, 2)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		r0 := start(t, ctx, lns[0], Config{Size: 2, Addrs: addrs, Secret: secretOf(1), TLS: true, Logger: logs.logger()})
		err := tlsRogue(t, addrs[0], secretOf(2), laneHello(1, 2, 1, 0))
		if !errors.Is(err, auth.ErrAuth) {
			t.Fatalf("rogue with another secret got %v, want ErrAuth", err)
		}
		// The rogue gives up first (it checks rank 0's key before sending
		// its own); rank 0 then rejects it.
		for end := time.Now().Add(10 * time.Second); len(logs.lines("rejected connection", "TLS")) == 0; {
			if time.Now().After(end) {
				t.Fatalf("rank 0 logged no TLS rejection; log:\n%s", logs.lines())
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if _, err := r0.wait(t); err == nil {
			t.Fatal("rank 0 formed a mesh with a rogue")
		}
	})
	t.Run("dial", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		g, err := auth.NewGuard(secretOf(2), true)
		if err != nil {
			t.Fatal(err)
		}
		var served sync.WaitGroup
		defer served.Wait()
		served.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				g.Server(c, hello(0, 2), time.Now().Add(5*time.Second))
				c.Close()
			}
		})
		lns, addrs := listenN(t, 1)
		lns[0].Close()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err = Connect(ctx, nil, Config{Rank: 1, Size: 2, Addrs: []string{ln.Addr().String(), addrs[0]}, Secret: secretOf(1), TLS: true})
		if err == nil || !strings.Contains(err.Error(), "TLS handshake") {
			t.Fatalf("dialing a server of another job: %v, want a failed TLS handshake", err)
		}
		ln.Close()
	})
}

// tlsRogue dials addr and runs a TLS client handshake with secret and hello.
func tlsRogue(t *testing.T, addr string, secret, hello []byte) error {
	t.Helper()
	g, err := auth.NewGuard(secret, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = g.Client(c, hello, time.Now().Add(5*time.Second))
	return err
}

// TestTLSMismatchNamedOnBothSides: a rank with TLS and one without fail
// Connect, each with an error that names the mismatch, within the
// context's bound.
func TestTLSMismatchNamedOnBothSides(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tls0, tls1 bool
	}{{"accepting rank TLS", true, false}, {"dialing rank TLS", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			lns, addrs := listenN(t, 2)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			begin := time.Now()
			r0 := start(t, ctx, lns[0], Config{Size: 2, Addrs: addrs, Secret: secretOf(1), TLS: tc.tls0, HandshakeTimeout: time.Hour})
			r1 := start(t, ctx, lns[1], Config{Rank: 1, Size: 2, Addrs: addrs, Secret: secretOf(1), TLS: tc.tls1, HandshakeTimeout: time.Hour})
			_, err0 := r0.wait(t)
			_, err1 := r1.wait(t)
			for r, err := range []error{err0, err1} {
				if err == nil || !strings.Contains(err.Error(), "started without it") {
					t.Errorf("rank %d: %v, want an error naming the TLS mismatch", r, err)
				}
			}
			if d := time.Since(begin); d > 20*time.Second {
				t.Errorf("Connect returned after %v", d)
			}
		})
	}
}

// writeLog records the writes made to it.
type writeLog struct {
	net.Conn
	writes [][]byte
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// TestSecureRecords: whatever the parts of a frame, the session receives
// their bytes in order, and every write but the last fills whole records,
// so no record but a frame's last is short.
func TestSecureRecords(t *testing.T) {
	r := tlsRecord
	for _, sizes := range [][]int{
		{frame.HeaderSize}, {frame.HeaderSize, 0}, {frame.HeaderSize, 100}, {frame.HeaderSize, r - frame.HeaderSize},
		{frame.HeaderSize, r - frame.HeaderSize + 1}, {frame.HeaderSize, 3*r + 5}, {frame.HeaderSize, 7, r, 2*r - 3, 1, 0, 5 * r},
	} {
		var parts [][]byte
		var want []byte
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte(i + 1)}, n)
			parts, want = append(parts, p), append(want, p...)
		}
		w := &writeLog{}
		s := &secureLanes{out: w, stage: make([]byte, 0, tlsRecord)}
		if err := s.records(parts); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Join(w.writes, nil); !bytes.Equal(got, want) {
			t.Errorf("parts %v: the session got %d bytes, not the frame's %d in order", sizes, len(got), len(want))
		}
		for i, b := range w.writes[:max(0, len(w.writes)-1)] {
			if len(b) == 0 || len(b)%r != 0 {
				t.Errorf("parts %v: write %d of %d is %d bytes, not whole records", sizes, i, len(w.writes), len(b))
			}
		}
	}
}
