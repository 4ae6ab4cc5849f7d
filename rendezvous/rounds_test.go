package rendezvous

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// roundTable returns the table of n ranks on host h whose addresses end in the
// round number, so tables of different rounds differ.
func roundTable(n, round int) []Peer {
	out := make([]Peer, n)
	for r := range out {
		out[r] = Peer{Rank: r, Host: "h", Addr: fmt.Sprintf("10.0.%d.%d:7000", round, r)}
	}
	return out
}

// TestRoundsAfterLeave: ranks whose runtimes shut down leave, register new
// addresses and form a new round. A rank that comes back early waits for
// every rank's new address instead of reading the old table; a rank of the
// old round still reads the old one; a new address without leaving is
// still a conflict.
func TestRoundsAfterLeave(t *testing.T) {
	const n = 2
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: n})
	c0, c1 := dial(t, s.Addr(), secret), dial(t, s.Addr(), secret)
	ctx := ctxFor(t, 10*time.Second)
	one, two := roundTable(n, 1), roundTable(n, 2)
	for r, c := range []*Client{c0, c1} {
		if err := c.Register(ctx, r, "h", one[r].Addr); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c0.PeerTable(ctx); err != nil || !reflect.DeepEqual(got, one) {
		t.Fatalf("round 1: %v, %v", got, err)
	}

	// Rank 0 shuts down and comes back first.
	if err := c0.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c0.Register(ctx, 0, "h", two[0].Addr); err != nil {
		t.Fatalf("registering again after leaving: %v", err)
	}
	if s.Round() != 2 || s.Registered() != 1 {
		t.Errorf("round %d with %d registered, want round 2 with 1", s.Round(), s.Registered())
	}
	if got, err := c0.PeerTable(ctxFor(t, 300*time.Millisecond)); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("round 2 before rank 1 came back: %v, %v; want ErrIncomplete, never round 1's table", got, err)
	} else if !strings.Contains(err.Error(), "rank 1 never registered") {
		t.Errorf("round 2's wait should name rank 1: %v", err)
	}
	// Rank 1, still in round 1, reads round 1's table.
	if got, err := c1.PeerTable(ctx); err != nil || !reflect.DeepEqual(got, one) {
		t.Fatalf("rank 1 of round 1: %v, %v", got, err)
	}
	if err := c1.Register(ctx, 1, "h", two[1].Addr); !errors.Is(err, ErrConflict) {
		t.Fatalf("a new address before leaving = %v, want ErrConflict", err)
	}
	if err := c1.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c1.Register(ctx, 1, "h", two[1].Addr); err != nil {
		t.Fatal(err)
	}
	for r, c := range []*Client{c0, c1} {
		if got, err := c.PeerTable(ctx); err != nil || !reflect.DeepEqual(got, two) {
			t.Fatalf("rank %d, round 2: %v, %v; want %v", r, got, err, two)
		}
	}
	if s.Round() != 2 || len(s.Missing()) != 0 {
		t.Errorf("round %d, missing %v", s.Round(), s.Missing())
	}
}

// TestOneRankRoundAfterRound: a job of one rank that leaves and registers
// again starts a round each time; Leave without a registration, or a
// second time, does nothing.
func TestOneRankRoundAfterRound(t *testing.T) {
	secret := newSecret(t)
	s := startServer(t, ServerConfig{Secret: secret, Size: 1})
	c := dial(t, s.Addr(), secret)
	ctx := ctxFor(t, 5*time.Second)
	if err := c.Leave(ctx); err != nil {
		t.Fatalf("Leave before Register: %v", err)
	}
	for round := 1; round <= 3; round++ {
		addr := fmt.Sprintf("10.0.0.%d:7000", round)
		if err := c.Register(ctx, 0, "h", addr); err != nil {
			t.Fatal(err)
		}
		if got, err := c.PeerTable(ctx); err != nil || got[0].Addr != addr {
			t.Fatalf("round %d: %v, %v", round, got, err)
		}
		if s.Round() != round {
			t.Fatalf("Round() = %d, want %d", s.Round(), round)
		}
		if err := c.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Leave(ctx); err != nil {
		t.Errorf("second Leave: %v", err)
	}
}

// TestSingleRoundServerIsReplaced: a SingleRound server (rank 0's, in a job
// that gorun did not start) refuses a registration for a later round with
// ErrStopped; Register retries it and lands on the server that takes the
// address next.
func TestSingleRoundServerIsReplaced(t *testing.T) {
	secret := newSecret(t)
	old := startServer(t, ServerConfig{Secret: secret, Size: 1, SingleRound: true})
	addr := old.Addr()
	c := dial(t, addr, secret)
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Register(ctx, 0, "h", "10.0.0.1:7000"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PeerTable(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.Register(ctxFor(t, 200*time.Millisecond), 0, "h", "10.0.0.2:7000")
	if !errors.Is(err, ErrStopped) || old.Round() != 1 {
		t.Fatalf("a later round on a single-round server = %v (round %d), want ErrStopped", err, old.Round())
	}
	done := make(chan error, 1)
	go func() { done <- c.Register(ctx, 0, "h", "10.0.0.2:7000") }()
	time.Sleep(100 * time.Millisecond)
	old.Stop()
	next := startServer(t, ServerConfig{Addr: addr, Secret: secret, Size: 1, SingleRound: true})
	if err := <-done; err != nil {
		t.Fatalf("Register across the server's replacement: %v", err)
	}
	if got, err := c.PeerTable(ctx); err != nil || got[0].Addr != "10.0.0.2:7000" {
		t.Fatalf("table of the next server: %v, %v", got, err)
	}
	if next.Registered() != 1 {
		t.Errorf("next server has %d registered", next.Registered())
	}
}

// TestBoardRounds walks the board through rounds without a server: a rank
// that leaves a round still forming takes its place again in it; ranks
// that come back join the round the first of them started; each table is
// the one of the caller's own round.
func TestBoardRounds(t *testing.T) {
	b := newBoard(3, []string{"a", "b", "c"}, false)
	reg := func(rank int, addr string) int {
		t.Helper()
		_, _, round, err := b.register(Peer{Rank: rank, Addr: addr})
		if err != nil {
			t.Fatalf("register(%d, %s): %v", rank, addr, err)
		}
		return round
	}
	leave := func(rank int, addr string) {
		t.Helper()
		if ok, err := b.leave(rank, addr); !ok || err != nil {
			t.Fatalf("leave(%d, %s) = %t, %v", rank, addr, ok, err)
		}
	}
	table := func(rank int, addr string) []Peer {
		b.mu.Lock()
		defer b.mu.Unlock()
		peers, _ := b.tableLocked(rank, addr)
		return peers
	}
	reg(0, "x:0")
	reg(1, "x:1")
	leave(1, "x:1") // gave up in a round still forming
	if got := b.missing(); len(got) != 2 || got[0] != (Peer{Rank: 1, Host: "b"}) {
		t.Fatalf("missing %v, want ranks 1 and 2", got)
	}
	if r := reg(1, "y:1"); r != 1 {
		t.Fatalf("coming back to a forming round: round %d", r)
	}
	reg(2, "x:2")
	one := table(2, "x:2")
	if one == nil || one[1].Addr != "y:1" || b.registered() != 3 {
		t.Fatalf("round 1 table %v", one)
	}
	select {
	case <-b.all:
	default:
		t.Fatal("all not closed after round 1")
	}
	for r := range 3 {
		leave(r, one[r].Addr)
	}
	if r := reg(2, "z:2"); r != 2 {
		t.Fatalf("first back starts round %d, want 2", r)
	}
	if r := reg(0, "z:0"); r != 2 {
		t.Fatalf("second back joins round %d, want 2", r)
	}
	if table(0, "z:0") != nil {
		t.Fatal("round 2's table before rank 1 came back")
	}
	if !reflect.DeepEqual(table(1, "y:1"), one) {
		t.Fatalf("rank 1 of round 1 reads %v, want %v", table(1, "y:1"), one)
	}
	if ok, _ := b.leave(1, "x:1"); ok {
		t.Fatal("leaving with a replaced address succeeded")
	}
	reg(1, "z:1")
	if two := table(1, "z:1"); two == nil || two[0].Addr != "z:0" || two[1].Addr != "z:1" || two[2].Addr != "z:2" {
		t.Fatalf("round 2 table %v", two)
	}
}
