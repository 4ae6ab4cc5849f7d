package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConcurrentRegisterSameTable(t *testing.T) {
	hosts := []string{"a", "a", "b", "b"}
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 4, Hosts: hosts})
	want := make([]Peer, 4)
	for r := range want {
		want[r] = Peer{Rank: r, Host: hosts[r], Addr: fmt.Sprintf("10.0.0.%d:7000", r)}
		if r > 0 { // rank 0 registers the old way, without a machine
			want[r].Machine = "boot-" + hosts[r] + "/0-1"
		}
	}
	tables := make([][]Peer, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	ctx := ctxFor(t, 5*time.Second)
	for _, r := range rand.Perm(4) {
		wg.Add(1)
		go func() { // dial, register and read concurrently, in shuffled order
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			c, err := Dial(ctx, s.Addr(), secret)
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			if r == 0 {
				errs[r] = c.Register(ctx, r, want[r].Host, want[r].Addr)
			} else {
				errs[r] = c.RegisterPeer(ctx, want[r])
			}
			if errs[r] == nil {
				tables[r], errs[r] = c.PeerTable(ctx)
			}
		}()
	}
	wg.Wait()
	for r := range 4 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !reflect.DeepEqual(tables[r], want) {
			t.Errorf("rank %d table %v, want %v", r, tables[r], want)
		}
	}
	select {
	case <-s.AllRegistered():
	default:
		t.Error("AllRegistered not closed")
	}
	if n := s.Registered(); n != 4 {
		t.Errorf("Registered() = %d, want 4", n)
	}
}

func TestPeerTableNamesMissingRank(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 4, Hosts: []string{"a", "a", "b", "b"}})
	c := dial(t, s.Addr(), secret)
	for r := range 3 {
		if err := c.Register(ctxFor(t, 2*time.Second), r, "", fmt.Sprintf("h:%d", r)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := c.PeerTable(ctxFor(t, 300*time.Millisecond))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("PeerTable took %s after a 300ms deadline", d)
	}
	var me *MissingError
	if !errors.As(err, &me) || !errors.Is(err, ErrIncomplete) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *MissingError matching ErrIncomplete and DeadlineExceeded", err)
	}
	if want := []Peer{{Rank: 3, Host: "b"}}; !reflect.DeepEqual(me.Missing, want) {
		t.Errorf("missing %v, want %v", me.Missing, want)
	}
	if !strings.HasPrefix(err.Error(), "rendezvous: rank 3 (host b) never registered within ") {
		t.Errorf("message %q", err)
	}
	if got := s.Missing(); len(got) != 1 || got[0].Rank != 3 {
		t.Errorf("server Missing() = %v", got)
	}
}

func TestMissingErrorMessage(t *testing.T) {
	e := &MissingError{Missing: []Peer{{Rank: 2, Host: "b"}, {Rank: 3, Host: "b"}}, Waited: 30*time.Second + 4*time.Millisecond}
	want := "rendezvous: ranks 2 (host b), 3 (host b) never registered within 30s"
	if e.Error() != want {
		t.Errorf("got %q, want %q", e.Error(), want)
	}
}

func TestRegisterValidation(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 2})
	c1, c2 := dial(t, s.Addr(), secret), dial(t, s.Addr(), secret)
	ctx := ctxFor(t, 5*time.Second)
	if err := c1.Register(ctx, 1, "a", "10.0.0.1:7000"); err != nil {
		t.Fatal(err)
	}
	if err := c1.Register(ctx, 1, "a", "10.0.0.1:7000"); err != nil {
		t.Errorf("same registration again: %v", err)
	}
	err := c2.Register(ctx, 1, "b", "10.0.0.2:7000")
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "10.0.0.1:7000") ||
		!strings.Contains(err.Error(), "10.0.0.2:7000") {
		t.Errorf("conflicting registration: %v, want ErrConflict naming both addresses", err)
	}
	for _, tc := range []struct {
		rank int
		addr string
	}{{2, "x:1"}, {-1, "x:1"}, {0, ""}} {
		if err := c2.Register(ctx, tc.rank, "b", tc.addr); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Register(%d, %q) = %v, want ErrBadRequest", tc.rank, tc.addr, err)
		}
	}
	long := Peer{Rank: 0, Host: "b", Addr: "10.0.0.2:7000", Machine: strings.Repeat("m", MaxMachineLen+1)}
	if err := c2.RegisterPeer(ctx, long); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "machine") {
		t.Errorf("a machine of %d bytes: %v, want ErrBadRequest naming the machine", len(long.Machine), err)
	}
	if n := s.Registered(); n != 1 {
		t.Errorf("Registered() = %d, want 1", n)
	}
}

func TestKeyValue(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c1, c2 := dial(t, s.Addr(), secret), dial(t, s.Addr(), secret)
	ctx := ctxFor(t, 5*time.Second)
	if err := c1.Set(ctx, "coordinator", []byte("10.0.0.1:9000")); err != nil {
		t.Fatal(err)
	}
	if v, err := c2.Get(ctx, "coordinator"); err != nil || string(v) != "10.0.0.1:9000" {
		t.Errorf("Get = %q, %v", v, err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		c1.Set(ctx, "later", []byte("v"))
	}()
	start := time.Now()
	if v, err := c2.Get(ctx, "later"); err != nil || string(v) != "v" {
		t.Errorf("waiting Get = %q, %v", v, err)
	} else if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("Get returned after %s, before the Set", d)
	}
	if err := c1.Set(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := c2.Get(ctx, "empty"); err != nil || v == nil || len(v) != 0 {
		t.Errorf("Get(empty) = %v, %v; want a non-nil empty value", v, err)
	}
	_, err := c2.Get(ctxFor(t, 200*time.Millisecond), "never")
	if !errors.Is(err, ErrNotSet) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get(never) = %v, want ErrNotSet and DeadlineExceeded", err)
	}
	if err := c1.Set(ctx, "", nil); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Set with empty key = %v", err)
	}
	if err := c1.Set(ctx, "big", make([]byte, MaxValueLen+1)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Set with oversized value = %v", err)
	}
}

func TestServerLifecycle(t *testing.T) {
	secret := newSecret(t)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop() // before Start: fine
	if err := s.Start(); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop = %v", err)
	}
	s.Stop()

	s = startServer(t, ServerConfig{Secret: secret, Size: 1})
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	busy, err := NewServer(ServerConfig{Addr: s.Addr(), Secret: secret, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Start(); !errors.Is(err, ErrConfig) {
		t.Errorf("Start on a busy port = %v", err)
	}
	busy.Stop()
	s.Stop()
	s.Stop()
}

func TestNewServerValidates(t *testing.T) {
	good := ServerConfig{Addr: "127.0.0.1:0", Secret: make([]byte, 32), Size: 2}
	for name, mutate := range map[string]func(*ServerConfig){
		"no addr":       func(c *ServerConfig) { c.Addr = "" },
		"short secret":  func(c *ServerConfig) { c.Secret = c.Secret[:16] },
		"zero size":     func(c *ServerConfig) { c.Size = 0 },
		"hosts count":   func(c *ServerConfig) { c.Hosts = []string{"a"} },
		"neg handshake": func(c *ServerConfig) { c.HandshakeTimeout = -time.Second },
	} {
		cfg := good
		mutate(&cfg)
		if _, err := NewServer(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

func TestStopUnblocksWaitingCalls(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 2})
	c := dial(t, s.Addr(), secret)
	errc := make(chan error, 1)
	go func() {
		_, err := c.PeerTable(ctxFor(t, 500*time.Millisecond))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Stop took %s with a blocked PeerTable", d)
	}
	if err := <-errc; !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrStopped) {
		t.Errorf("PeerTable after Stop = %v, want ErrStopped or ErrIncomplete", err)
	}
}
