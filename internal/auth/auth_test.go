package auth

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, SecretSize) }

type result struct {
	hello []byte
	err   error
}

func pair(t *testing.T, cs, ss []byte) (client, server result) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	dl := time.Now().Add(2 * time.Second)
	done := make(chan result, 1)
	go func() {
		h, err := Server(b, ss, []byte("server"), dl)
		if err != nil {
			b.Close() // a real server drops the connection
		}
		done <- result{h, err}
	}()
	h, err := Client(a, cs, []byte("rank=3"), dl)
	if err != nil {
		a.Close()
	}
	return result{h, err}, <-done
}

func TestHandshakeSucceeds(t *testing.T) {
	c, s := pair(t, secret(7), secret(7))
	if c.err != nil || s.err != nil {
		t.Fatalf("client err %v, server err %v", c.err, s.err)
	}
	if string(c.hello) != "server" || string(s.hello) != "rank=3" {
		t.Fatalf("hellos: client got %q, server got %q", c.hello, s.hello)
	}
}

func TestWrongSecretRejectedBothWays(t *testing.T) {
	c, s := pair(t, secret(1), secret(2))
	if !errors.Is(s.err, ErrAuth) {
		t.Fatalf("server accepted a wrong secret: %v", s.err)
	}
	if c.err == nil {
		t.Fatal("client believes a handshake that the server rejected")
	}
}

func TestGarbageAndSilence(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		buf := make([]byte, 36)
		a.Read(buf)
		a.Write(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 4))
	}()
	if _, err := Server(b, secret(1), nil, time.Now().Add(time.Second)); !errors.Is(err, ErrAuth) {
		t.Fatalf("garbage: got %v", err)
	}
	b.Close()

	c, d := net.Pipe()
	defer c.Close()
	go func() { buf := make([]byte, 64); c.Read(buf) }() // reads the challenge, then says nothing
	start := time.Now()
	_, err := Server(d, secret(1), nil, time.Now().Add(200*time.Millisecond))
	if !errors.Is(err, ErrAuth) || time.Since(start) > 2*time.Second {
		t.Fatalf("silence: got %v after %v", err, time.Since(start))
	}
}

func TestBadSecretLength(t *testing.T) {
	a, _ := net.Pipe()
	if _, err := Client(a, []byte("short"), nil, time.Now()); !errors.Is(err, ErrAuth) {
		t.Fatalf("got %v", err)
	}
}

func TestMACFramingIsUnambiguous(t *testing.T) {
	k := secret(3)
	if bytes.Equal(mac(k, "x", []byte("ab"), []byte("c")), mac(k, "x", []byte("a"), []byte("bc"))) {
		t.Fatal("field boundaries are not bound into the MAC")
	}
}

// FuzzServer feeds arbitrary client bytes to the server side: it must never
// panic and never accept without the secret.
func FuzzServer(f *testing.F) {
	f.Add([]byte("GRV1"))
	f.Add(append([]byte("GRV1"), make([]byte, 100)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() {
			buf := make([]byte, 36)
			if _, err := a.Read(buf); err == nil {
				a.Write(in)
			}
			a.Close()
		}()
		if _, err := Server(b, secret(9), nil, time.Now().Add(time.Second)); err == nil {
			t.Fatal("server accepted fuzz input")
		}
	})
}
