package tcptransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
)

// rogue is a client that must be turned away during mesh formation.
type rogue struct {
	name   string
	reason string // what rank 0's Warn line must say
	play   func(c net.Conn, deadline time.Time)
}

func rogues(secret []byte) []rogue {
	handshakeWith := func(secret, hello []byte) func(net.Conn, time.Time) {
		return func(c net.Conn, d time.Time) { auth.Client(c.(*net.TCPConn), secret, hello, d) }
	}
	handshake := func(secret []byte, rank, size int) func(net.Conn, time.Time) {
		return handshakeWith(secret, laneHello(rank, size, rank, 0))
	}
	return []rogue{
		{"wrong secret", "wrong secret", handshake(secretOf(0xee), 1, 2)},
		{"garbage", "bad magic", func(c net.Conn, _ time.Time) {
			c.Write([]byte("GET / HTTP/1.1\r\nHost: gorovod\r\nUser-Agent: curl/8.0\r\n\r\n"))
		}},
		{"silent", "i/o timeout", func(net.Conn, time.Time) {}},
		{"rank out of range", "claims rank 7", handshake(secret, 7, 2)},
		{"size mismatch", "job of 3 ranks", handshake(secret, 1, 3)},
		{"no lane", "malformed hello", handshakeWith(secret, hello(1, 2))},
		{"foreign lane", "opens lane 1>2", handshakeWith(secret, laneHello(1, 2, 1, 2))},
	}
}

// TestRoguesAreDropped lets every kind of rogue knock on rank 0 before
// rank 1 shows up: each is closed and logged with its reason (the first at
// Warn, the rest, from the same host, at Debug and then counted in one Warn
// line), and the mesh still forms.
func TestRoguesAreDropped(t *testing.T) {
	var logs logBuffer
	secret := secretOf(1)
	lns, addrs := listenN(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cfg := Config{Size: 2, Addrs: addrs, Secret: secret, HandshakeTimeout: 300 * time.Millisecond, Logger: logs.logger()}
	r0 := start(t, ctx, lns[0], cfg)

	remotes := make([]string, 0)
	for _, r := range rogues(secret) {
		c, err := net.Dial("tcp", addrs[0])
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		r.play(c, time.Now().Add(5*time.Second))
		untilClosed(c) // rank 0 hangs up on the rogue
		c.Close()
		remotes = append(remotes, c.LocalAddr().String())
	}

	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	t0, err0 := r0.wait(t)
	t1, err1 := r1.wait(t)
	if err0 != nil || err1 != nil {
		t.Fatalf("mesh did not form: rank 0: %v; rank 1: %v", err0, err1)
	}
	exchange(t, t1, t0)
	for i, r := range rogues(secret) {
		level := "level=DEBUG" // all come from one host: only the first is a Warn
		if i == 0 {
			level = "level=WARN"
		}
		if len(logs.lines(level, "rejected connection", "remote="+remotes[i], r.reason)) != 1 {
			t.Errorf("%s: no %s line with remote=%s and %q; log:\n%s", r.name, level, remotes[i], r.reason, logs.lines())
		}
	}
	n := len(rogues(secret)) - 1
	if len(logs.lines("level=WARN", "rejected more connections", "host=127.0.0.1", fmt.Sprintf("count=%d ", n))) != 1 {
		t.Errorf("no Warn line counting the %d rejections after the first; log:\n%s", n, logs.lines())
	}
}

// TestSilentIntruderDoesNotBlock connects a silent client before the real
// peer, with a handshake timeout far beyond the test's context: the mesh
// must form anyway, and the intruder is dropped when it does.
func TestSilentIntruderDoesNotBlock(t *testing.T) {
	var logs logBuffer
	lns, addrs := listenN(t, 2)
	silent, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	cfg := Config{Size: 2, Addrs: addrs, Secret: secretOf(1), HandshakeTimeout: time.Hour, Logger: logs.logger()}
	r0 := start(t, ctx, lns[0], cfg)
	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	if _, err := r0.wait(t); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if _, err := r1.wait(t); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	if err := untilClosed(silent); err != nil {
		t.Errorf("intruder still connected after the mesh formed: %v", err)
	}
	if len(logs.lines("dropped connection", "remote="+silent.LocalAddr().String())) != 1 {
		t.Errorf("no line about dropping the intruder; log:\n%s", logs.lines())
	}
}

// TestDuplicateRank plays ranks 1 and 2 of a 3-rank job against a real
// rank 0: a second connection claiming rank 1's lane 1>0 is refused.
func TestDuplicateRank(t *testing.T) {
	var logs logBuffer
	secret := secretOf(1)
	lns, addrs := listenN(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r0 := start(t, ctx, lns[0], Config{Size: 3, Addrs: addrs, Secret: secret, Logger: logs.logger()})
	if _, _, err := fakePeer(t, addrs[0], secret, 1, 3); err != nil {
		t.Fatalf("first rank 1: %v", err)
	}
	dup, _, err := fakePeer(t, addrs[0], secret, 1, 3)
	if err == nil {
		t.Fatal("second rank 1 was acknowledged")
	}
	if _, _, err := fakePeer(t, addrs[0], secret, 2, 3); err != nil {
		t.Fatalf("rank 2: %v", err)
	}
	if _, err := r0.wait(t); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if len(logs.lines("level=WARN", "remote="+dup.LocalAddr().String(), "duplicate connection for rank 1 lane 1>0")) != 1 {
		t.Errorf("no Warn line about the duplicate; log:\n%s", logs.lines())
	}
}

// TestMissingRank leaves rank 2 of 3 out: ranks 0 and 1 give up when their
// context ends and name it.
func TestMissingRank(t *testing.T) {
	lns, addrs := listenN(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	cfg := Config{Size: 3, Addrs: addrs, Secret: secretOf(1)}
	r0 := start(t, ctx, lns[0], cfg)
	cfg.Rank = 1
	r1 := start(t, ctx, lns[1], cfg)
	for rank, p := range []*pending{r0, r1} {
		_, err := p.wait(t)
		if !errors.Is(err, collective.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: err = %v, want a timeout", rank, err)
		}
		if err != nil && !strings.Contains(err.Error(), "rank(s) [2] never connected") {
			t.Errorf("rank %d: err = %v, want it to name rank 2", rank, err)
		}
	}
}

// TestUnreachableLowerRank dials a rank that refuses connections: the
// error names it with the last dial error.
func TestUnreachableLowerRank(t *testing.T) {
	lns, addrs := listenN(t, 2)
	lns[0].Close() // rank 0 never listens
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, nil, Config{Rank: 1, Size: 2, Addrs: addrs, Secret: secretOf(1)})
	if !errors.Is(err, collective.ErrTimeout) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if !containsAll(err.Error(), "rank(s) [0] never connected", "rank 0 ("+addrs[0]+")", "refused") {
		t.Errorf("err = %v, want it to name rank 0, its address and the dial error", err)
	}
}

// TestSecretMismatch runs two real ranks with different secrets: neither
// accepts the other, both log it at Warn and time out naming the other.
func TestSecretMismatch(t *testing.T) {
	var logs logBuffer
	lns, addrs := listenN(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	r0 := start(t, ctx, lns[0], Config{Size: 2, Addrs: addrs, Secret: secretOf(1), Logger: logs.logger()})
	r1 := start(t, ctx, lns[1], Config{Rank: 1, Size: 2, Addrs: addrs, Secret: secretOf(2), Logger: logs.logger()})
	if _, err := r0.wait(t); err == nil || !strings.Contains(err.Error(), "[1] never connected") {
		t.Errorf("rank 0: err = %v, want it to name rank 1", err)
	}
	if _, err := r1.wait(t); err == nil || !containsAll(err.Error(), "[0] never connected", "authentication failed") {
		t.Errorf("rank 1: err = %v, want it to name rank 0 and the failed handshake", err)
	}
	if len(logs.lines("level=WARN", "rank=0", "wrong secret")) == 0 {
		t.Errorf("rank 0 did not log the wrong secret; log:\n%s", logs.lines())
	}
	if len(logs.lines("level=WARN", "rank=1", "dial failed", "peer=0")) == 0 {
		t.Errorf("rank 1 did not log its failed dial; log:\n%s", logs.lines())
	}
}

func TestConnectValidatesConfig(t *testing.T) {
	good := func() Config {
		return Config{Rank: 0, Size: 2, Addrs: []string{"a:1", "b:2"}, Secret: secretOf(1)}
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"size", func(c *Config) { c.Size = 0 }, "size 0"},
		{"rank", func(c *Config) { c.Rank = 2 }, "rank 2 out of range"},
		{"addrs", func(c *Config) { c.Addrs = c.Addrs[:1] }, "1 addresses for 2 ranks"},
		{"machines", func(c *Config) { c.Machines = []string{"m", "m", "m"} }, "3 machines for 2 ranks"},
		{"secret", func(c *Config) { c.Secret = c.Secret[:16] }, "secret is 16 bytes"},
		{"timeout", func(c *Config) { c.HandshakeTimeout = -1 }, "negative handshake timeout"},
	}
	for _, c := range cases {
		ln, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := good()
		c.edit(&cfg)
		_, err = Connect(t.Context(), ln, cfg)
		if !errors.Is(err, collective.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", c.name, err, c.want)
		}
		if conn, err := net.Dial("tcp", ln.Addr()); err == nil {
			conn.Close()
			t.Errorf("%s: listener still open after a failed Connect", c.name)
		}
	}
	if _, err := Connect(t.Context(), nil, good()); !errors.Is(err, collective.ErrInvalid) {
		t.Errorf("rank 0 without a listener: err = %v, want ErrInvalid", err)
	}
}
