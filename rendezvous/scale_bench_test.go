package rendezvous

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkScaleRendezvous measures the start-up barrier of jobs of 256
// and 1,024 ranks against one real server over loopback: every client
// dials (one TCP connection and the HMAC handshake each), registers its
// address and waits for the peer table, all at once, as the ranks of a
// job do. ns/op is the time from the first dial until the last client
// holds the table; dial-ms is until the last client is connected and
// register-ms until the server has every registration; B/client is the
// live heap per client once all hold the table, both ends of its
// connection included (in a real job the server's end lives in the
// launcher). Each iteration starts a fresh server and n fresh clients,
// all in this process (2n sockets), and closes them untimed.
//
//	go test ./rendezvous -run '^$' -bench ScaleRendezvous -benchtime 3x
func BenchmarkScaleRendezvous(b *testing.B) {
	for _, n := range []int{256, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ensureFiles(b, uint64(2*n+256))
			secret := newSecret(b)
			want := make([]Peer, n)
			for r := range want {
				want[r] = Peer{Rank: r, Host: fmt.Sprintf("node%03d", r/8), Addr: fmt.Sprintf("10.0.%d.%d:7000", r/256, r%256)}
			}
			var dialed, registered time.Duration
			var kept int64
			for range b.N {
				b.StopTimer()
				base := liveHeapBytes()
				s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Secret: secret, Size: n})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Start(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r := formRendezvous(b, s, secret, want)
				b.StopTimer()
				dialed += r.dialed
				registered += r.registered
				kept += liveHeapBytes() - base
				r.close()
				s.Stop()
				b.StartTimer()
			}
			b.ReportMetric(dialed.Seconds()*1e3/float64(b.N), "dial-ms")
			b.ReportMetric(registered.Seconds()*1e3/float64(b.N), "register-ms")
			b.ReportMetric(float64(kept)/float64(b.N*n), "B/client")
		})
	}
}

// rendezvousRun is one formation: its clients, and when (after the start)
// the last client connected and the last registration arrived.
type rendezvousRun struct {
	clients            []*Client
	dialed, registered time.Duration
}

func (r *rendezvousRun) close() {
	var wg sync.WaitGroup
	for _, c := range r.clients {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// formRendezvous runs a client per entry of want against s, all at once:
// dial, Register that entry, PeerTable. It returns when every client holds
// the table, which it checks against want.
func formRendezvous(b *testing.B, s *Server, secret []byte, want []Peer) *rendezvousRun {
	n := len(want)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := &rendezvousRun{clients: make([]*Client, n)}
	dialedAt := make([]time.Duration, n)
	errs := make([]error, n)
	start := time.Now()
	registered := make(chan time.Duration, 1)
	go func() {
		select {
		case <-s.AllRegistered():
			registered <- time.Since(start)
		case <-ctx.Done():
			registered <- 0
		}
	}()
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c, err := Dial(ctx, s.Addr(), secret)
			if err != nil {
				errs[r] = err
				return
			}
			run.clients[r] = c
			dialedAt[r] = time.Since(start)
			if err := c.Register(ctx, r, want[r].Host, want[r].Addr); err != nil {
				errs[r] = err
				return
			}
			peers, err := c.PeerTable(ctx)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = checkScaleTable(peers, want)
		})
	}
	wg.Wait()
	run.registered = <-registered
	for r, err := range errs {
		if err != nil {
			run.close()
			b.Fatalf("rank %d: %v", r, err)
		}
		run.dialed = max(run.dialed, dialedAt[r])
	}
	return run
}

func checkScaleTable(peers, want []Peer) error {
	if len(peers) != len(want) {
		return fmt.Errorf("table of %d peers, want %d", len(peers), len(want))
	}
	for r, p := range peers {
		if p != want[r] {
			return fmt.Errorf("table entry %d is %+v, want %+v", r, p, want[r])
		}
	}
	return nil
}

// liveHeapBytes is the bytes of live heap objects after a collection.
func liveHeapBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// ensureFiles raises this process's soft limit on open files to at least
// want (within the hard limit), or skips b. Go already raises the soft
// limit to the hard one at start-up on Linux; this covers a hard limit
// that was lowered, and says why the benchmark cannot run.
func ensureFiles(b *testing.B, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("cannot read the open-file limit: %v", err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		b.Skipf("needs %d open files; the hard limit is %d", want, lim.Max)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("cannot raise the open-file limit to %d: %v", want, err)
	}
}
