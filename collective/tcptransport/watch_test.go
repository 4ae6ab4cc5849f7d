package tcptransport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
)

// TestWatchKeepsContext: calls under one context, or alternating between
// two (as an engine's negotiation and data do), register each once, on TCP
// and shared-memory links alike, and a context's end between calls fails
// nothing: the next call under it reports it, the link stays usable.
func TestWatchKeepsContext(t *testing.T) {
	for _, onShm := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "shm"}[onShm], func(t *testing.T) {
			m := meshT(t, 2, Config{NoSharedMemory: !onShm})
			c0, c1 := m[0].Conn(1).(*conn), m[1].Conn(0).(*conn)
			if _, isShm := c0.link.(*shm.Link); isShm != onShm {
				t.Fatalf("link over shared memory: %v, want %v", isShm, onShm)
			}
			ctx, cancel := context.WithCancel(t.Context())
			other, cancelOther := context.WithCancel(t.Context())
			defer cancelOther()
			buf := make([]byte, 64)
			// sendAll sends 50 frames of sequence seq, the i-th under ctxs[i%len(ctxs)].
			sendAll := func(seq uint64, ctxs ...context.Context) {
				for i := range 50 {
					tag, use := collective.Tag{Seq: seq, Step: uint32(i)}, ctxs[i%len(ctxs)]
					if err := c0.Send(use, tag, buf); err != nil {
						t.Fatal(err)
					}
					if err := c1.Recv(use, tag, buf); err != nil {
						t.Fatal(err)
					}
				}
			}
			sendAll(1, ctx)
			if c0.sendWatch.gen != 1 || c1.recvWatch.gen != 1 {
				t.Fatalf("watch generations %d and %d after 50 calls under one context, want 1", c0.sendWatch.gen, c1.recvWatch.gen)
			}
			sendAll(2, ctx, other)
			if c0.sendWatch.gen != 2 || c1.recvWatch.gen != 2 {
				t.Fatalf("watch generations %d and %d after calls alternating two contexts, want 2", c0.sendWatch.gen, c1.recvWatch.gen)
			}
			cancel()
			time.Sleep(10 * time.Millisecond) // let the watches' fires run
			if err := c0.Send(ctx, tag11, buf); !errors.Is(err, context.Canceled) {
				t.Fatalf("Send under the ended context: %v, want context.Canceled", err)
			}
			if f := c0.failed.Load(); f != nil {
				t.Fatalf("the link failed after its context ended between calls: %v", f.err)
			}
			exchange(t, m[0], m[1])
		})
	}
}

// TestWatchIgnoresOldContext: the end of a context watched by an earlier
// call does not fail a call under another, however late its fire runs;
// the end of the current call's context does.
func TestWatchIgnoresOldContext(t *testing.T) {
	m := localMeshT(t, 2)
	c0 := m[0].Conn(1).(*conn)
	w := &c0.sendWatch
	ctx1, cancel1 := context.WithCancel(t.Context())
	defer cancel1()
	w.begin(ctx1)
	w.end()
	gen1 := w.gen
	ctx2, cancel2 := context.WithCancel(t.Context())
	w.begin(ctx2)
	cancel1()
	w.expire(ctx1, gen1) // a fire of ctx1 that ran late
	if f := c0.failed.Load(); f != nil {
		t.Fatalf("an earlier call's context failed the link: %v", f.err)
	}
	cancel2()
	deadline := time.Now().Add(10 * time.Second)
	for c0.failed.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.end()
	f := c0.failed.Load()
	if f == nil || !errors.Is(f.err, context.Canceled) {
		t.Fatalf("link failure %v after the call's context ended, want context.Canceled", f)
	}
	if w.slots[0].ctx != nil || w.slots[1].ctx != nil {
		t.Fatal("a failed link still watches contexts")
	}
}
