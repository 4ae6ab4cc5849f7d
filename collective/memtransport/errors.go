package memtransport

import (
	"fmt"

	"github.com/gorovod/gorovod/collective"
)

// Errors of this package wrap the sentinels of package collective; the
// functions below give them one wording.

func errClosed(rank int) error {
	return fmt.Errorf("memtransport: rank %d: %w", rank, collective.ErrClosed)
}

func errPeerGone(rank, peer int) error {
	return fmt.Errorf("memtransport: rank %d: peer %d is gone: %w", rank, peer, collective.ErrPeerGone)
}

func errBroken(a, b int) error {
	return fmt.Errorf("memtransport: link %d-%d broken: %w", a, b, collective.ErrPeerGone)
}

func errContext(op string, rank, peer int, err error) error {
	return fmt.Errorf("memtransport: rank %d: %s with peer %d: %w", rank, op, peer, err)
}

func errMismatch(rank, peer int, got message, want collective.Tag, wantLen int) error {
	return fmt.Errorf("memtransport: rank %d: recv from %d: "+
		"got seq %d step %d len %d, want seq %d step %d len %d: %w",
		rank, peer, got.tag.Seq, got.tag.Step, len(got.data),
		want.Seq, want.Step, wantLen, collective.ErrProtocol)
}

func errInvalidPeer(rank, peer, size int) error {
	return fmt.Errorf("memtransport: rank %d: peer %d not in [0, %d) or self: %w", rank, peer, size, collective.ErrInvalid)
}
