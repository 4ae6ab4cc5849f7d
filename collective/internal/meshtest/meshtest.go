package meshtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/memtransport"
	"github.com/gorovod/gorovod/collective/tcptransport"
)

// Func makes the transports of n in-process ranks.
type Func func(t testing.TB, n int) []collective.Transport

// Kinds are the meshes every collective is tested on: in memory, over TCP
// (between hosts) and over shared memory (on one host).
func Kinds() []Kind {
	return []Kind{{"mem", Mem}, {"tcp", TCP}, {"shm", Shm}}
}

// Kind is a named kind of mesh.
type Kind struct {
	Name string
	Make Func
}

// Mem: n ranks linked in memory (memtransport).
func Mem(t testing.TB, n int) []collective.Transport {
	return memtransport.NewNetwork(n).Transports()
}

// TCP: n in-process ranks whose links all carry their frames over
// loopback TCP (shared memory off), the path between ranks on different
// hosts.
func TCP(t testing.TB, n int) []collective.Transport {
	t.Helper()
	return Local(t, n, tcptransport.TCP)
}

// Shm: n in-process ranks on one host as shipped, every link moving its
// frames through shared-memory rings (its sockets only watch the peer).
func Shm(t testing.TB, n int) []collective.Transport {
	t.Helper()
	return Local(t, n, tcptransport.SharedMemory)
}

// Local forms a tcptransport mesh of n ranks and fails t unless every link
// took path.
func Local(t testing.TB, n int, path tcptransport.Path) []collective.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := tcptransport.Config{Secret: bytes.Repeat([]byte{7}, 32), NoSharedMemory: path == tcptransport.TCP}
	ts, err := tcptransport.LocalMeshConfig(ctx, n, cfg)
	if err != nil {
		t.Fatalf("%v mesh of %d: %v", path, n, err)
	}
	if err := CheckPaths(ts, path); err != nil {
		for _, tr := range ts {
			tr.Close()
		}
		t.Fatal(err)
	}
	return ts
}

// Comms builds one communicator per rank over mk's mesh and closes them at
// cleanup.
func Comms(t *testing.T, mk Func, n int, opts collective.Options) []*collective.Comm {
	t.Helper()
	cs := make([]*collective.Comm, n)
	for i, tr := range mk(t, n) {
		cs[i] = collective.NewComm(tr, opts)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// MustAll fails t with the first rank's error, if any.
func MustAll(t testing.TB, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// CheckPaths reports the first link of ts that did not take path.
func CheckPaths(ts []collective.Transport, path tcptransport.Path) error {
	for r, tr := range ts {
		for p := range ts {
			if got := tcptransport.LinkPath(tr, p); p != r && got != path {
				return fmt.Errorf("%v mesh of %d: the link from rank %d to %d is on %v", path, len(ts), r, p, got)
			}
		}
	}
	return nil
}
