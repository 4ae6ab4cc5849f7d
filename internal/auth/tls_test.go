package auth

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

type guardResult struct {
	conn  net.Conn
	hello []byte
	err   error
}

// guardPair runs a client guard against a server guard over loopback TCP.
func guardPair(t *testing.T, client, server *Guard) (c, s guardResult) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dl := time.Now().Add(10 * time.Second)
	done := make(chan guardResult, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- guardResult{err: err}
			return
		}
		conn, h, err := server.Server(nc, []byte("server"), dl)
		if err != nil {
			nc.Close()
		}
		done <- guardResult{conn, h, err}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, h, err := client.Client(nc, []byte("rank=3"), dl)
	if err != nil {
		nc.Close()
	}
	c, s = guardResult{conn, h, err}, <-done
	t.Cleanup(func() {
		for _, r := range []guardResult{c, s} {
			if r.conn != nil {
				r.conn.Close()
			}
		}
	})
	return c, s
}

func newGuard(t *testing.T, s []byte, useTLS bool) *Guard {
	t.Helper()
	g, err := NewGuard(s, useTLS)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGuardTLSCarriesEncryptedBytes(t *testing.T) {
	c, s := guardPair(t, newGuard(t, secret(7), true), newGuard(t, secret(7), true))
	if c.err != nil || s.err != nil {
		t.Fatalf("client err %v, server err %v", c.err, s.err)
	}
	if string(c.hello) != "server" || string(s.hello) != "rank=3" {
		t.Fatalf("hellos: client got %q, server got %q", c.hello, s.hello)
	}
	for _, r := range []guardResult{c, s} {
		tc, ok := r.conn.(*tls.Conn)
		if !ok {
			t.Fatalf("stream is %T, not a TLS session", r.conn)
		}
		if v := tc.ConnectionState().Version; v != tls.VersionTLS13 {
			t.Fatalf("TLS version %#x, want 1.3", v)
		}
	}
	msg := []byte("through the session")
	go c.conn.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(s.conn, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestGuardPlainReturnsTheConnection(t *testing.T) {
	c, s := guardPair(t, newGuard(t, secret(7), false), newGuard(t, secret(7), false))
	if c.err != nil || s.err != nil {
		t.Fatalf("client err %v, server err %v", c.err, s.err)
	}
	if _, ok := c.conn.(*net.TCPConn); !ok {
		t.Fatalf("plain stream is %T", c.conn)
	}
}

func TestGuardTLSWrongSecretRefusedBothWays(t *testing.T) {
	c, s := guardPair(t, newGuard(t, secret(1), true), newGuard(t, secret(2), true))
	if !errors.Is(c.err, ErrAuth) || !errors.Is(s.err, ErrAuth) {
		t.Fatalf("wrong secret: client err %v, server err %v", c.err, s.err)
	}
}

func TestGuardMismatchNamedOnBothSides(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server bool
	}{{"plain client, TLS server", false, true}, {"TLS client, plain server", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, s := guardPair(t, newGuard(t, secret(7), tc.client), newGuard(t, secret(7), tc.server))
			for side, err := range map[string]error{"client": c.err, "server": s.err} {
				if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "TLS") {
					t.Errorf("%s: %v, want ErrMismatch", side, err)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("mismatch took %v: it waited for a deadline", d)
			}
		})
	}
}

// TestGuardBindingIsPerSession: the key the HMAC handshake runs with is
// the same at both ends of one TLS session and differs between sessions,
// so proofs made in one session (a relay's) do not verify in another.
func TestGuardBindingIsPerSession(t *testing.T) {
	g := newGuard(t, secret(7), true)
	var keys [2][2][]byte
	for i := range keys {
		c, s := guardPair(t, g, g)
		if c.err != nil || s.err != nil {
			t.Fatalf("client err %v, server err %v", c.err, s.err)
		}
		for j, r := range []guardResult{c, s} {
			k, err := bind(secret(7), r.conn.(*tls.Conn))
			if err != nil {
				t.Fatal(err)
			}
			keys[i][j] = k
		}
	}
	if !bytes.Equal(keys[0][0], keys[0][1]) || !bytes.Equal(keys[1][0], keys[1][1]) {
		t.Fatal("the two ends of a session bind different keys")
	}
	if bytes.Equal(keys[0][0], keys[1][0]) {
		t.Fatal("two sessions bind the same key")
	}
}
