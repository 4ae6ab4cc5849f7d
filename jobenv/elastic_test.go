package jobenv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

func elasticServer(t *testing.T) (*rendezvous.Client, func() *rendezvous.Client) {
	t.Helper()
	secret := bytes.Repeat([]byte{3}, 32)
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dial := func() *rendezvous.Client {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := rendezvous.Dial(ctx, srv.Addr(), secret)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return dial(), dial
}

func gen(n int, ids ...string) jobenv.Generation {
	g := jobenv.Generation{N: n}
	for i, id := range ids {
		g.Members = append(g.Members, jobenv.ElasticMember{ID: id, Host: fmt.Sprint("h", i%2)})
	}
	return g
}

// TestElasticGenerations: workers wait for the next generation, skip to
// the latest one when they lag, find their rank in it, and exchange their
// addresses; malformed generations are refused before they are published.
func TestElasticGenerations(t *testing.T) {
	driver, dial := elasticServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, bad := range []jobenv.Generation{gen(0, "a"), gen(1), gen(1, "a", "a"), gen(1, "")} {
		if err := jobenv.PublishGeneration(ctx, driver, bad); !errors.Is(err, jobenv.ErrElasticProtocol) {
			t.Errorf("generation %+v published: %v", bad, err)
		}
	}
	worker := dial()
	got := make(chan jobenv.Generation, 1)
	go func() {
		g, err := jobenv.AwaitGeneration(ctx, worker, 0)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	select {
	case g := <-got:
		t.Fatalf("a generation before any was published: %+v", g)
	case <-time.After(100 * time.Millisecond):
	}
	if err := jobenv.PublishGeneration(ctx, driver, gen(1, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g.N != 1 || g.RankOf("c") != 2 || g.RankOf("z") != -1 || !slices.Equal(g.Hosts(), []string{"h0", "h1", "h0"}) {
		t.Fatalf("first generation: %+v", g)
	}
	if err := jobenv.PublishGeneration(ctx, driver, gen(2, "a", "c")); err != nil {
		t.Fatal(err)
	}
	if err := jobenv.PublishGeneration(ctx, driver, gen(3, "c", "a", "d")); err != nil {
		t.Fatal(err)
	}
	if n, err := jobenv.NewerGeneration(ctx, worker, 1); err != nil || n != 2 {
		t.Fatalf("NewerGeneration(1) = %d, %v", n, err)
	}
	if g, err := jobenv.AwaitGeneration(ctx, worker, 1); err != nil || g.N != 3 || g.RankOf("a") != 1 {
		t.Fatalf("a worker of generation 1 gets %+v, %v; want the latest, 3", g, err)
	}
	addrs, machines := make([][]string, 3), make([][]string, 3)
	errs := make(chan error, 3)
	for r := range 3 {
		go func() {
			var err error
			m := fmt.Sprint("boot/", r) // rank 2's is too long to be one, and reads as none
			if r == 2 {
				m = strings.Repeat("m", rendezvous.MaxMachineLen+1)
			}
			addrs[r], machines[r], err = jobenv.ExchangeAddrs(ctx, dial(), 3, r, 3, fmt.Sprint("10.0.0.", r, ":99"), m)
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"10.0.0.0:99", "10.0.0.1:99", "10.0.0.2:99"}
	for r, a := range addrs {
		if !slices.Equal(a, want) {
			t.Errorf("rank %d got addresses %v, want %v", r, a, want)
		}
		if wantM := []string{"boot/0", "boot/1", ""}; !slices.Equal(machines[r], wantM) {
			t.Errorf("rank %d got machines %q, want %q", r, machines[r], wantM)
		}
	}
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	defer stop()
	if _, _, err := jobenv.ExchangeAddrs(short, worker, 4, 0, 2, "x:1", ""); err == nil {
		t.Error("ExchangeAddrs returned without the other rank's address")
	}
}
