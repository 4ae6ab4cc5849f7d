package transporttest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gorovod/gorovod/collective"
)

// A flow is a run of messages from one rank to another under one Seq:
// message i has Step i, len(sizes[i]) bytes and content fixed by its place.
type flow struct {
	from, to int
	seq      uint64
	sizes    []int
}

// content returns the bytes of message i.
func (f flow) content(i int) []byte {
	id := f.seq<<48 ^ uint64(f.from)<<40 ^ uint64(f.to)<<32 ^ uint64(i)
	return payload(id, f.sizes[i])
}

func (f flow) String() string { return fmt.Sprintf("%d->%d seq %d", f.from, f.to, f.seq) }

// send sends every message of f in order.
func (f flow) send(ctx context.Context, m []collective.Transport) error {
	c := m[f.from].Conn(f.to)
	for i := range f.sizes {
		tag := collective.Tag{Seq: f.seq, Step: uint32(i)}
		if err := c.Send(ctx, tag, f.content(i)); err != nil {
			return fmt.Errorf("flow %v: Send step %d: %w", f, i, err)
		}
	}
	return nil
}

// recv receives every message of f in order and checks its content.
func (f flow) recv(ctx context.Context, m []collective.Transport) error {
	c := m[f.to].Conn(f.from)
	for i, n := range f.sizes {
		p := make([]byte, n)
		tag := collective.Tag{Seq: f.seq, Step: uint32(i)}
		if err := c.Recv(ctx, tag, p); err != nil {
			return fmt.Errorf("flow %v: Recv step %d: %w", f, i, err)
		}
		if d := firstDiff(p, f.content(i)); d >= 0 {
			return fmt.Errorf("flow %v: step %d (%d B) corrupted at byte %d", f, i, n, d)
		}
	}
	return nil
}

// runFlows runs all flows at once, each sender and each receiver on its own
// goroutine, and fails t with every error they return.
func runFlows(t *testing.T, m []collective.Transport, flows ...flow) {
	t.Helper()
	ctx := opContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(flows))
	for _, f := range flows {
		wg.Go(func() { errs <- f.send(ctx, m) })
		wg.Go(func() { errs <- f.recv(ctx, m) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
