package hvd

import (
	"context"
	"testing"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
)

type promising struct{ collective.Conn }

func (promising) Buffered(messages int) int { return 1000 - messages }

// TestBlameConnPassesBuffered: the reporting wrapper forwards what the
// link it wraps promises to buffer, and promises nothing for a link that
// promises nothing, so wrapping does not change how the Comm executes.
func TestBlameConnPassesBuffered(t *testing.T) {
	ts := memtransport.NewNetwork(2).Transports()
	defer ts[0].Close()
	defer ts[1].Close()
	for _, c := range []struct {
		conn collective.Conn
		want int
	}{
		{promising{ts[0].Conn(1)}, 997},
		{ts[0].Conn(1), 0},
	} {
		bc := &blameConn{Conn: c.conn, peer: 1}
		var b collective.Buffered = bc
		if got := b.Buffered(3); got != c.want {
			t.Errorf("%T: Buffered(3) = %d, want %d", c.conn, got, c.want)
		}
	}
}

// direct stands for a link that can wait for its receiver and reduce as
// messages arrive; it records the calls.
type direct struct {
	collective.Conn
	waits, reduces int
}

func (d *direct) SendWait(ctx context.Context, tag collective.Tag, p []byte) error {
	d.waits++
	return d.Conn.Send(ctx, tag, p)
}

func (d *direct) ReducesOnArrival() bool { return true }

func (d *direct) RecvReduce(ctx context.Context, tag collective.Tag, dst []byte, esz int, reduce func(dst, src []byte)) error {
	d.reduces++
	return d.Conn.Recv(ctx, tag, dst)
}

// TestBlameConnPassesRendezvousAndReduce: the reporting wrapper passes
// SendWait and RecvReduce to a link that has them, and says it reduces on
// arrival only then; for one that has not it sends as Send does and
// reduces through a buffer, so that wrapping changes neither what arrives
// nor how. Both count their bytes, as Send and Recv do.
func TestBlameConnPassesRendezvousAndReduce(t *testing.T) {
	ts := memtransport.NewNetwork(2).Transports()
	defer ts[0].Close()
	defer ts[1].Close()
	ctx := t.Context()
	d := &direct{Conn: ts[0].Conn(1)}
	for _, c := range []collective.Conn{d, ts[0].Conn(1)} {
		bc := &blameConn{Conn: c, peer: 1}
		if err := bc.SendWait(ctx, collective.Tag{Seq: 1}, []byte{7}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 1)
		if err := ts[1].Conn(0).Recv(ctx, collective.Tag{Seq: 1}, got); err != nil || got[0] != 7 {
			t.Fatalf("%T: received %v, %v; want [7]", c, got, err)
		}
		if want := c == d; bc.ReducesOnArrival() != want {
			t.Errorf("%T: ReducesOnArrival = %v, want %v", c, !want, want)
		}
		if err := ts[1].Conn(0).Send(ctx, collective.Tag{Seq: 2}, []byte{5}); err != nil {
			t.Fatal(err)
		}
		got[0] = 1
		err := bc.RecvReduce(ctx, collective.Tag{Seq: 2}, got, 1, func(dst, src []byte) { dst[0] += src[0] })
		if want := map[bool]byte{true: 5, false: 6}[c == d]; err != nil || got[0] != want {
			t.Errorf("%T: RecvReduce left %v, %v; want [%d]", c, got, err, want)
		}
		if s, r := bc.sent.Load(), bc.recv.Load(); s != 1 || r != 1 {
			t.Errorf("%T: counted %d bytes sent and %d received, want 1 and 1", c, s, r)
		}
	}
	if d.waits != 1 || d.reduces != 1 {
		t.Errorf("the wrapped link saw %d SendWait and %d RecvReduce calls, want 1 and 1", d.waits, d.reduces)
	}
}
