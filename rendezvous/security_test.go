package rendezvous

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
)

// assertNoSecret fails if text contains secret in any common encoding.
func assertNoSecret(t *testing.T, what, text string, secret []byte) {
	t.Helper()
	for _, enc := range []string{
		string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret),
		fmt.Sprint(secret), fmt.Sprintf("%x", secret[:8]),
	} {
		if strings.Contains(text, enc) {
			t.Errorf("%s contains the secret (%q…)", what, enc[:min(len(enc), 12)])
		}
	}
}

func TestWrongSecretRejected(t *testing.T) {
	var logs logBuf
	secret, wrong := newSecret(t), newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1, Logger: logs.logger()})
	start := time.Now()
	c, err := Dial(ctxFor(t, 5*time.Second), s.Addr(), wrong)
	if err == nil {
		c.Close()
		t.Fatal("Dial with a wrong secret succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Dial took %s to give up", d)
	}
	if !errors.Is(err, ErrAuth) || !errors.Is(err, auth.ErrAuth) || !strings.Contains(err.Error(), "authentication") {
		t.Errorf("Dial error %q does not report an authentication failure", err)
	}
	attempts := strings.Count(logs.String(), "rejected connection")
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(logs.String(), "rejected connection"); n > 4 || n != attempts {
		t.Errorf("%d rejected handshakes (%d at Dial's return): the client spins", n, attempts)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"rendezvous: rejected connection\" remote=127.0.0.1:") {
		t.Errorf("no Warn with the remote address in logs:\n%s", logs.String())
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d handler calls from an unauthenticated client", n)
	}
	assertNoSecret(t, "logs", logs.String(), secret)
	assertNoSecret(t, "logs", logs.String(), wrong)
	assertNoSecret(t, "error", err.Error(), wrong)
}

func TestGarbageConnectionRejected(t *testing.T) {
	var logs logBuf
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1, Logger: logs.logger()})
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Something that is not the handshake: gorpc's own compression byte
	// followed by junk, as a hook-less gorpc client would send.
	conn.Write(append([]byte{0}, []byte(strings.Repeat("not a handshake ", 8))...))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(conn); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("server did not close the connection: %v", err) // EOF or reset are fine
	}
	if !strings.Contains(logs.String(), "bad magic") {
		t.Errorf("no rejection logged:\n%s", logs.String())
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d handler calls from a garbage connection", n)
	}
}

func TestSilentConnectionDoesNotBlockStop(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1, HandshakeTimeout: 10 * time.Second})
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	challenge := make([]byte, 36) // the server is inside the handshake once it sent this
	if _, err := io.ReadFull(conn, challenge); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stop waited %s for a silent connection", d)
	}
}

func TestHandshakeDeadlineDropsSilentPeer(t *testing.T) {
	var logs logBuf
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1, Logger: logs.logger(), HandshakeTimeout: 150 * time.Millisecond})
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("server kept a silent connection: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("silent peer dropped after %s", d)
	}
	if !strings.Contains(logs.String(), "rejected connection") {
		t.Errorf("drop not logged:\n%s", logs.String())
	}
}

func TestSecretNeverShown(t *testing.T) {
	var logs logBuf
	secret := newSecret(t)
	cfg := ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 2, Logger: logs.logger()}
	s := startServer(t, cfg)
	c := dial(t, s.Addr(), secret, WithLogger(logs.logger()))
	ctx := ctxFor(t, 5*time.Second)
	if err := c.Register(ctx, 0, "a", "x:1"); err != nil {
		t.Fatal(err)
	}
	_, err := c.PeerTable(ctxFor(t, 100*time.Millisecond))
	logs.logger().Info("config", "cfg", cfg, "server", s, "client", c)
	text := fmt.Sprintf("%v %+v %#v %s %v %+v %#v %#v %v", cfg, cfg, cfg, cfg, s, c, s, c, err)
	assertNoSecret(t, "formatted values", text, secret)
	assertNoSecret(t, "logs", logs.String(), secret)
	if !strings.Contains(text, "[redacted]") {
		t.Errorf("config does not say the secret is redacted: %s", text)
	}
}

// TestHandshakesBounded: a server is inside the handshake with at most
// maxHandshakes connections at once; one more is closed at once, long
// before the handshake timeout, and logged; once the silent ones go, a
// rank connects as usual. NewServer sizes the bound by the job.
func TestHandshakesBounded(t *testing.T) {
	if got, want := maxHandshakes(1024), 2*1024+256; got != want {
		t.Errorf("maxHandshakes(1024) = %d, want %d", got, want)
	}
	const most = 20
	var logs logBuf
	secret := newSecret(t)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1, Logger: logs.logger(), HandshakeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s.maxHandshakes = most
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	var silent []net.Conn
	for range most {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		challenge := make([]byte, 36) // the server is inside the handshake once it sent this
		if _, err := io.ReadFull(c, challenge); err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, extra); err != nil || n != 0 {
		t.Errorf("connection beyond the bound: read %d bytes, %v; want it closed at once", n, err)
	}
	// The refusal closes the connection (lifecycle.Conns.AddBelow) before
	// onConnect logs it, so the line may come just after the close.
	for wait := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "too many in the handshake at once"); time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Errorf("refusal not logged within 10s:\n%s", logs.String())
			break
		}
	}
	// A rank that dials meanwhile is refused, and does not take that for
	// a wrong secret: it keeps trying, and connects once the silent ones
	// are gone.
	var clientLogs logBuf
	dialed := make(chan error, 1)
	go func() {
		c, err := Dial(ctxFor(t, 30*time.Second), s.Addr(), secret, WithLogger(clientLogs.logger()))
		if err == nil {
			c.Close()
		}
		dialed <- err
	}()
	for wait := time.Now().Add(10 * time.Second); strings.Count(clientLogs.String(), "rendezvous: handshake failed") < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("the dialing rank was not refused 4 times within 10s:\n%s", clientLogs.String())
		}
	}
	for _, c := range silent {
		c.Close()
	}
	if err := <-dialed; err != nil {
		t.Fatalf("Dial while the server refused connections: %v", err)
	}
	for wait := time.Now().Add(10 * time.Second); s.handshakes.Len() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("%d handshakes still tracked 10s after their peers closed", s.handshakes.Len())
		}
	}
	c, err := Dial(ctxFor(t, 10*time.Second), s.Addr(), secret)
	if err != nil {
		t.Fatalf("Dial after the silent connections went: %v", err)
	}
	c.Close()
}
