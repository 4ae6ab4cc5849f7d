package tcptransport

import (
	"fmt"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// SharedMemoryCheck reports whether this process can make the
// shared-memory ring that a link between two ranks on one host offers its
// peer (see the package documentation): it creates one, memory file and
// mapping, and releases both at once. A nil error means that a rank of this
// process's kind, on this host, can offer rings; whether its peer can open
// them (same user, same pid namespace) only the link's own handshake finds
// out. An error says why not: the links of such a rank to ranks on its own
// host would stay on TCP, as they do under Config.NoSharedMemory.
func SharedMemoryCheck() error {
	r, f, _, err := shmring.Create(shmring.MinCapacity)
	if err != nil {
		return fmt.Errorf("tcptransport: shared memory: %w", err)
	}
	r.Unmap()
	if err := f.Close(); err != nil {
		return fmt.Errorf("tcptransport: shared memory: close ring file: %w", err)
	}
	return nil
}
