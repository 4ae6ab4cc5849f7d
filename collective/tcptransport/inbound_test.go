package tcptransport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
)

// meshT is localMesh with cfg for tests: it fails t on error and closes the
// transports when t ends.
func meshT(t *testing.T, size int, cfg Config) []collective.Transport {
	t.Helper()
	return meshTuned(t, size, cfg, tuning{})
}

// meshTuned is meshT with tun's settings.
func meshTuned(t *testing.T, size int, cfg Config, tun tuning) []collective.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := localMesh(ctx, size, cfg, tun)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tr := range m {
			tr.Close()
		}
	})
	return m
}

// TestRoundTripDoesNotAllocate echoes small (polled) and large (parked)
// messages between two ranks, over TCP and over shared memory, and counts
// heap allocations. The echo ends on a message whose first byte is 1.
func TestRoundTripDoesNotAllocate(t *testing.T) {
	for _, tcp := range []bool{true, false} {
		for _, tun := range []tuning{{spin: time.Hour}, {spin: -1}, {spin: -1, nap: tcpNap}} {
			for _, n := range []int{4 << 10, 256 << 10} {
				spin := tun.spin
				m := meshTuned(t, 2, Config{NoSharedMemory: tcp}, tun)
				ctx := context.Background()
				out, in, echo := make([]byte, n), make([]byte, n), make([]byte, n)
				tag := collective.Tag{Seq: 1}
				done := make(chan error, 1)
				go func() {
					for {
						if err := m[1].Conn(0).Recv(ctx, tag, echo); err != nil {
							done <- err
							return
						}
						if err := m[1].Conn(0).Send(ctx, tag, echo); err != nil || echo[0] == 1 {
							done <- err
							return
						}
					}
				}()
				allocs := testing.AllocsPerRun(50, func() {
					if err := m[0].Conn(1).Send(ctx, tag, out); err != nil {
						t.Fatal(err)
					}
					if err := m[0].Conn(1).Recv(ctx, tag, in); err != nil {
						t.Fatal(err)
					}
				})
				out[0] = 1
				m[0].Conn(1).Send(ctx, tag, out)
				m[0].Conn(1).Recv(ctx, tag, in)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if allocs != 0 {
					t.Errorf("tcp only %v, spin %v, nap %v, %d bytes: %v allocations per round trip, want 0", tcp, spin, tun.nap, n, allocs)
				}
			}
		}
	}
}

// TestPollEndsOnPeerClose: a Recv polling with a budget far beyond the
// test's, or napping (tcpNap) and then parked, ends with ErrPeerGone as
// soon as the peer closes; so does one whose own side closes, or whose
// context ends, while it naps or is parked.
func TestPollEndsOnPeerClose(t *testing.T) {
	for _, tun := range []tuning{{spin: time.Hour}, {spin: -1, nap: tcpNap}, {spin: -1, nap: 50 * time.Millisecond}} {
		for _, end := range []string{"peer closes", "closes here", "context ends"} {
			m := meshTuned(t, 2, Config{NoSharedMemory: true}, tun)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- m[1].Conn(0).Recv(ctx, tag11, make([]byte, 8)) }()
			time.Sleep(20 * time.Millisecond)
			want := collective.ErrPeerGone
			switch end {
			case "peer closes":
				m[0].Close()
			case "closes here":
				m[1].Close()
				want = collective.ErrClosed
			default:
				cancel()
				want = context.Canceled
			}
			select {
			case err := <-errc:
				if !errors.Is(err, want) {
					t.Errorf("spin %v, nap %v, %s: err = %v, want %v", tun.spin, tun.nap, end, err, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("spin %v, nap %v: Recv did not end when the %s", tun.spin, tun.nap, end)
			}
			cancel()
		}
	}
}

// TestPollFallsBackToParking: a Recv whose poll runs out of budget parks
// and still gets its frame, and the next Recv polls again.
func TestPollFallsBackToParking(t *testing.T) {
	m := meshTuned(t, 2, Config{}, tuning{spin: time.Millisecond})
	for seq := range uint64(3) {
		sent := make(chan error, 1)
		go func() {
			time.Sleep(20 * time.Millisecond) // well past the budget
			sent <- m[0].Conn(1).Send(context.Background(), collective.Tag{Seq: seq}, []byte("late"))
		}()
		p := make([]byte, 4)
		if err := m[1].Conn(0).Recv(t.Context(), collective.Tag{Seq: seq}, p); err != nil || string(p) != "late" {
			t.Fatalf("Recv = %q, %v; want \"late\"", p, err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRawIOOnlyWhereRanksPark: a rank's TCP links make raw readv and
// writev calls only where it waits for every message by parking (its TCP
// reads never poll and it has no shared-memory links); elsewhere they go
// through the scheduler. Frames still travel both ways on raw links (the
// conformance suite's "tcp/spin=off" runs every operation on them).
func TestRawIOOnlyWhereRanksPark(t *testing.T) {
	cpus := runtime.NumCPU()
	over := make([]string, cpus+1) // more ranks on this host than processors: TCP never polls
	for i := range over {
		over[i] = fmt.Sprintf("10.0.0.1:%d", 7000+i)
	}
	if tun := (tuning{}).normalize(0, over, nil); !tun.parksOnly(true) || tun.parksOnly(false) {
		t.Errorf("more ranks than processors: parks only %v over TCP, %v with shared memory; want true, false", tun.parksOnly(true), tun.parksOnly(false))
	}
	if tun := (tuning{spin: time.Hour}).normalize(0, over, nil); tun.parksOnly(true) {
		t.Error("a rank whose TCP reads poll parks only")
	}
	for _, c := range []struct {
		spin time.Duration
		raw  bool
	}{{-1, true}, {time.Hour, false}} {
		m := meshTuned(t, 3, Config{NoSharedMemory: true}, tuning{spin: c.spin})
		for r, tr := range m {
			for p := range m {
				if p == r {
					continue
				}
				l, ok := tr.(*transport).slots[p].formed.Load().link.(*tcpLink)
				if !ok || l.r.raw != c.raw {
					t.Fatalf("spin %v: rank %d's link to %d is %T, raw %v; want a TCP link, raw %v", c.spin, r, p, l, ok && l.r.raw, c.raw)
				}
			}
		}
		// A large frame each way, which takes many readv and writev calls.
		big := make([]byte, 8<<20)
		for i := range big {
			big[i] = byte(i * 7)
		}
		got := make([]byte, len(big))
		sent := make(chan error, 1)
		go func() { sent <- m[0].Conn(2).Send(t.Context(), tag11, big) }()
		if err := m[2].Conn(0).Recv(t.Context(), tag11, got); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("spin %v: Recv of 8 MiB: %v, equal %v", c.spin, err, bytes.Equal(got, big))
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
}
