package hvd

import (
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
