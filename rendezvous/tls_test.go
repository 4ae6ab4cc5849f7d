package rendezvous

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
)

// tap is a TCP relay in front of a server that records every byte it
// passes, both ways: a passive observer of the wire.
type tap struct {
	ln    net.Listener
	mu    sync.Mutex
	seen  bytes.Buffer
	relay sync.WaitGroup
}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln}
	p.relay.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.relay.Go(func() { p.copy(s, c) })
			p.relay.Go(func() { p.copy(c, s) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.relay.Wait()
	})
	return p
}

// copy passes src to dst, recording it, and closes both at the end.
func (p *tap) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.seen.Write(buf[:n])
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *tap) saw(marker string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.seen.Bytes(), []byte(marker))
}

// TestTLSRendezvousHidesTheTable registers a rank whose host and address
// carry a marker through a recording relay: without TLS the relay sees the
// marker (so it would catch it), with TLS it does not, and the table
// arrives intact either way.
func TestTLSRendezvousHidesTheTable(t *testing.T) {
	const marker = "gorovod-marker-7f3a"
	for _, useTLS := range []bool{false, true} {
		secret := newSecret(t)
		s := startServer(t, ServerConfig{Secret: secret, Size: 1, TLS: useTLS})
		p := newTap(t, s.Addr())
		c := dial(t, p.ln.Addr().String(), secret, WithTLS(useTLS))
		ctx := ctxFor(t, 10*time.Second)
		if err := c.Register(ctx, 0, marker+"-host", marker+":1"); err != nil {
			t.Fatalf("tls %v: Register: %v", useTLS, err)
		}
		peers, err := c.PeerTable(ctx)
		if err != nil || len(peers) != 1 || peers[0].Host != marker+"-host" {
			t.Fatalf("tls %v: PeerTable %+v, %v", useTLS, peers, err)
		}
		if got := p.saw(marker); got == useTLS {
			t.Errorf("tls %v: marker on the wire: %v", useTLS, got)
		}
	}
}

// TestTLSRendezvousWrongSecretRefused: a TLS client of another job fails
// Dial with ErrAuth, and the server logs the rejection.
func TestTLSRendezvousWrongSecretRefused(t *testing.T) {
	var logs logBuf
	s := startServer(t, ServerConfig{Secret: newSecret(t), Size: 1, TLS: true, Logger: logs.logger()})
	c, err := Dial(ctxFor(t, 10*time.Second), s.Addr(), newSecret(t), WithTLS(true))
	if err == nil {
		c.Close()
		t.Fatal("Dial with a wrong secret succeeded over TLS")
	}
	if !errors.Is(err, ErrAuth) {
		t.Errorf("Dial error %v, want ErrAuth", err)
	}
	if !strings.Contains(logs.String(), "rejected connection") || s.calls.Load() != 0 {
		t.Errorf("server calls %d, logs:\n%s", s.calls.Load(), logs.String())
	}
}

// TestTLSRendezvousMismatch: a client and a server of which one uses TLS
// fail, each naming the mismatch, well before any deadline.
func TestTLSRendezvousMismatch(t *testing.T) {
	for _, serverTLS := range []bool{true, false} {
		var logs logBuf
		secret := newSecret(t)
		s := startServer(t, ServerConfig{Secret: secret, Size: 1, TLS: serverTLS, Logger: logs.logger(), HandshakeTimeout: time.Hour})
		begin := time.Now()
		c, err := Dial(ctxFor(t, 20*time.Second), s.Addr(), secret, WithTLS(!serverTLS), WithHandshakeTimeout(time.Hour))
		if err == nil {
			c.Close()
			t.Fatalf("server TLS %v: Dial succeeded across a TLS mismatch", serverTLS)
		}
		if !errors.Is(err, auth.ErrMismatch) || !strings.Contains(err.Error(), "started without it") {
			t.Errorf("server TLS %v: Dial error %v, want one naming the mismatch", serverTLS, err)
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Errorf("server TLS %v: Dial gave up after %v", serverTLS, d)
		}
		waitFor(t, func() bool { return strings.Contains(logs.String(), "started without it") },
			"server log naming the mismatch")
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Errorf("no %s", what)
}
