package tcptransport

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestSharedMemoryCheck: where memfd_create is known (amd64 and arm64), the
// check succeeds and leaves neither a descriptor nor a mapping behind;
// elsewhere it fails and says why.
func TestSharedMemoryCheck(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		err := SharedMemoryCheck()
		if err == nil || !strings.Contains(err.Error(), "memfd_create") {
			t.Fatalf("SharedMemoryCheck on %s: %v, want an error naming memfd_create", runtime.GOARCH, err)
		}
		return
	}
	if err := SharedMemoryCheck(); err != nil { // also settles any descriptor the runtime opens on first use
		t.Fatalf("SharedMemoryCheck: %v", err)
	}
	fds, rings := openFiles(t), mappedRings(t)
	for range 5 {
		if err := SharedMemoryCheck(); err != nil {
			t.Fatalf("SharedMemoryCheck: %v", err)
		}
	}
	if n := openFiles(t); n != fds {
		t.Errorf("%d open descriptors after 5 checks, %d before", n, fds)
	}
	if n := mappedRings(t); n != rings {
		t.Errorf("%d rings mapped after 5 checks, %d before", n, rings)
	}
}

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// mappedRings counts the ring-sized shared mappings of this process.
func mappedRings(t *testing.T) int {
	t.Helper()
	rings, err := ringMappings(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return len(rings)
}
