package tcptransport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport/shm"
	"github.com/gorovod/gorovod/collective/transporttest"
)

// TestConformance runs the transport suite over shared memory (what links
// between ranks on one host use) and over TCP, each three ways: as shipped
// (polling decided per host), with every small Recv polling for far longer
// than any test waits (so that Close, cancellation and peer failure must
// all end a poll), and with polling off; and with every link formed on
// demand, on either path; and with TLS over TCP (every frame through the
// sessions) and in shared memory (the handshakes in TLS). Every full mesh is checked to run every link on
// the path its variant names.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name string
		cfg  Config
		tun  tuning
		path Path
	}{
		{"shm/auto", Config{}, tuning{}, SharedMemory},
		{"shm/spin=1h", Config{}, tuning{spin: time.Hour}, SharedMemory},
		{"shm/spin=off", Config{}, tuning{spin: -1}, SharedMemory},
		{"tcp/auto", Config{NoSharedMemory: true}, tuning{}, TCP},
		{"tcp/spin=1h", Config{NoSharedMemory: true}, tuning{spin: time.Hour}, TCP},
		{"tcp/spin=off", Config{NoSharedMemory: true}, tuning{spin: -1}, TCP},
		{"shm/on-demand", Config{Eager: []int{}}, tuning{}, NoLink},
		{"tcp/on-demand", Config{NoSharedMemory: true, Eager: []int{}}, tuning{}, NoLink},
		{"tls/tcp", Config{NoSharedMemory: true, TLS: true}, tuning{}, TCP},
		{"tls/shm", Config{TLS: true}, tuning{}, SharedMemory},
		{"shm/remote", Config{}, tuning{remoteMin: shm.RemoteFloor}, SharedMemory},
		{"shm/remote-refused", Config{}, tuning{remoteMin: shm.RemoteFloor, refuseRemote: true}, SharedMemory},
		{"tls/shm/remote", Config{TLS: true}, tuning{remoteMin: shm.RemoteFloor}, SharedMemory},
	} {
		t.Run(v.name, func(t *testing.T) {
			transporttest.Run(t, func(t *testing.T, size int) []collective.Transport {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				m, err := localMesh(ctx, size, v.cfg, v.tun)
				if err != nil {
					t.Fatalf("LocalMesh(%d): %v", size, err)
				}
				if bad := offPath(m, v.path); bad != "" {
					for _, tr := range m {
						tr.Close()
					}
					t.Fatal(bad)
				}
				return m
			})
		})
	}
}

// offPath describes the first link of m that is not on path, or returns
// "" when all are.
func offPath(m []collective.Transport, path Path) string {
	for r, tr := range m {
		for p := range m {
			if got := LinkPath(tr, p); p != r && got != path {
				return fmt.Sprintf("rank %d's link to %d is on %v, want %v", r, p, got, path)
			}
		}
	}
	return ""
}
