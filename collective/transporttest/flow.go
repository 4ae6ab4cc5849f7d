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
	// wait sends with SendWait where the link has it (collective.Rendezvous);
	// reduce receives every other message with RecvReduce where the link
	// has it (collective.ReduceReceiver; whether or not it reduces on
	// arrival), into a buffer of ones, with a byte-wise sum.
	wait, reduce bool
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
	rv, wait := c.(collective.Rendezvous)
	for i := range f.sizes {
		tag := collective.Tag{Seq: f.seq, Step: uint32(i)}
		send := c.Send
		if wait && f.wait {
			send = rv.SendWait
		}
		if err := send(ctx, tag, f.content(i)); err != nil {
			return fmt.Errorf("flow %v: Send step %d: %w", f, i, err)
		}
	}
	return nil
}

// recv receives every message of f in order and checks its content.
func (f flow) recv(ctx context.Context, m []collective.Transport) error {
	c := m[f.to].Conn(f.from)
	rr, canReduce := c.(collective.ReduceReceiver)
	for i, n := range f.sizes {
		p := make([]byte, n)
		tag := collective.Tag{Seq: f.seq, Step: uint32(i)}
		if f.reduce && canReduce && i%2 == 0 {
			if err := recvReduce(ctx, rr, tag, p); err != nil {
				return fmt.Errorf("flow %v: RecvReduce step %d: %w", f, i, err)
			}
			if d := firstDiff(p, f.content(i)); d >= 0 {
				return fmt.Errorf("flow %v: step %d (%d B) reduced wrong at byte %d", f, i, n, d)
			}
			continue
		}
		if err := c.Recv(ctx, tag, p); err != nil {
			return fmt.Errorf("flow %v: Recv step %d: %w", f, i, err)
		}
		if d := firstDiff(p, f.content(i)); d >= 0 {
			return fmt.Errorf("flow %v: step %d (%d B) corrupted at byte %d", f, i, n, d)
		}
	}
	return nil
}

// recvReduce receives into p with rr: p filled with ones, a byte-wise
// sum, elements of 4 bytes where the length allows; it then takes the
// ones away again, so that p should hold the message.
func recvReduce(ctx context.Context, rr collective.ReduceReceiver, tag collective.Tag, p []byte) error {
	esz := 1
	if len(p)%4 == 0 {
		esz = 4
	}
	for i := range p {
		p[i] = 1
	}
	var bad error
	err := rr.RecvReduce(ctx, tag, p, esz, func(dst, src []byte) {
		if len(dst) != len(src) || len(src)%esz != 0 {
			bad = fmt.Errorf("reduce of %d bytes into %d, elements of %d", len(src), len(dst), esz)
		}
		for i := range src {
			dst[i] += src[i]
		}
	})
	if err == nil {
		err = bad
	}
	for i := range p {
		p[i]--
	}
	return err
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
