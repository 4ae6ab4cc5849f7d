package rendezvous

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testutil"
)

func TestDialUnreachable(t *testing.T) {
	addr := testutil.FreeAddr(t)
	var logs logBuf
	start := time.Now()
	_, err := Dial(ctxFor(t, 400*time.Millisecond), addr, newSecret(t), WithLogger(logs.logger()))
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Dial = %v, want ErrUnreachable quoting the refusal", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Dial took %s with a 400ms context", d)
	}
	// With back-off (50, 100, 200 ms…) 400 ms hold a handful of attempts.
	if n := strings.Count(logs.String(), "dial failed"); n > 8 {
		t.Errorf("%d dial attempts in 400ms: no back-off", n)
	}
}

func TestDialValidates(t *testing.T) {
	ctx := context.Background()
	if _, err := Dial(ctx, "127.0.0.1:1", make([]byte, 5)); !errors.Is(err, ErrConfig) {
		t.Errorf("short secret: %v", err)
	}
	if _, err := Dial(ctx, "", make([]byte, 32)); !errors.Is(err, ErrConfig) {
		t.Errorf("empty address: %v", err)
	}
	if _, err := Dial(ctx, "127.0.0.1:1", make([]byte, 32), WithCallTimeout(0)); !errors.Is(err, ErrConfig) {
		t.Errorf("zero call timeout: %v", err)
	}
}

func TestReconnectAfterServerRestart(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	addr := s.Addr()
	c := dial(t, addr, secret)
	if err := c.Ping(ctxFor(t, time.Second)); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := c.Ping(ctxFor(t, 200*time.Millisecond)); err == nil {
		t.Fatal("Ping succeeded with the server stopped")
	}
	startServer(t, ServerConfig{Addr: addr, Secret: secret, Size: 1})
	if err := c.Register(ctxFor(t, 5*time.Second), 0, "a", "x:1"); err != nil {
		t.Errorf("Register after restart: %v", err)
	}
}

func TestCallsFollowContext(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 2})
	c := dial(t, s.Addr(), secret)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.PeerTable(ctx)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrIncomplete) {
		t.Errorf("PeerTable after cancel = %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("PeerTable returned %s after cancel", d)
	}
}

func TestCloseWhileDisconnected(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c, err := Dial(ctxFor(t, 5*time.Second), s.Addr(), secret)
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	errc := make(chan error, 1)
	go func() { errc <- c.Register(context.Background(), 0, "a", "x:1") }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Register interrupted by Close = %v", err)
	}
	if d := time.Since(start); d > DefaultCallTimeout+500*time.Millisecond {
		t.Errorf("Close took %s", d)
	}
}
