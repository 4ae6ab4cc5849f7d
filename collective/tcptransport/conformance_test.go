package tcptransport

import (
	"context"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/transporttest"
)

// TestConformance runs the transport suite over shared memory (what links
// between ranks on one host use) and over TCP, each three ways: as shipped
// (polling decided per host), with every small Recv polling for far longer
// than any test waits (so that Close, cancellation and peer failure must
// all end a poll), and with polling off.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name string
		cfg  Config
	}{
		{"shm/auto", Config{}},
		{"shm/spin=1h", Config{spin: time.Hour}},
		{"shm/spin=off", Config{spin: -1}},
		{"tcp/auto", Config{DisableSharedMemory: true}},
		{"tcp/spin=1h", Config{spin: time.Hour, DisableSharedMemory: true}},
		{"tcp/spin=off", Config{spin: -1, DisableSharedMemory: true}},
	} {
		t.Run(v.name, func(t *testing.T) {
			transporttest.Run(t, func(t *testing.T, size int) []collective.Transport {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				m, err := localMesh(ctx, size, v.cfg)
				if err != nil {
					t.Fatalf("LocalMesh(%d): %v", size, err)
				}
				return m
			})
		})
	}
}
