package tcptransport

import (
	"context"
	"errors"
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
		for _, spin := range []time.Duration{time.Hour, -1} {
			for _, n := range []int{4 << 10, 256 << 10} {
				m := meshTuned(t, 2, Config{NoSharedMemory: tcp}, tuning{spin: spin})
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
					t.Errorf("tcp only %v, spin %v, %d bytes: %v allocations per round trip, want 0", tcp, spin, n, allocs)
				}
			}
		}
	}
}

// TestPollEndsOnPeerClose: a Recv polling with a budget far beyond the
// test's ends with ErrPeerGone as soon as the peer closes.
func TestPollEndsOnPeerClose(t *testing.T) {
	m := meshTuned(t, 2, Config{}, tuning{spin: time.Hour})
	errc := make(chan error, 1)
	go func() { errc <- m[1].Conn(0).Recv(t.Context(), tag11, make([]byte, 8)) }()
	time.Sleep(20 * time.Millisecond)
	m[0].Close()
	select {
	case err := <-errc:
		if !errors.Is(err, collective.ErrPeerGone) {
			t.Errorf("err = %v, want ErrPeerGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("polling Recv did not end when the peer closed")
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
