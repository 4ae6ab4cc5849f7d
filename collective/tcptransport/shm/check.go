package shm

import (
	"fmt"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// Check reports whether this process can make the ring that a link
// between two ranks on one host offers its peer: it creates one, memory
// file and mapping, and releases both at once. A nil error means that a
// rank of this process's kind, on this host, can offer rings; whether its
// peer can open them (same user, same pid namespace) only the link's own
// handshake finds out. An error says why not.
func Check() error {
	r, f, _, err := shmring.Create(shmring.MinCapacity)
	if err != nil {
		return err
	}
	r.Unmap()
	if err := f.Close(); err != nil {
		return fmt.Errorf("close ring file: %w", err)
	}
	return nil
}
