package shm

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// TestCheck: where memfd_create is known (amd64 and arm64), the
// check succeeds and leaves neither a descriptor nor a mapping behind;
// elsewhere it fails and says why.
func TestCheck(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		err := Check()
		if err == nil || !strings.Contains(err.Error(), "memfd_create") {
			t.Fatalf("Check on %s: %v, want an error naming memfd_create", runtime.GOARCH, err)
		}
		return
	}
	if err := Check(); err != nil { // also settles any descriptor the runtime opens on first use
		t.Fatalf("Check: %v", err)
	}
	fds, rings := openFiles(t), mappedRings(t)
	for range 5 {
		if err := Check(); err != nil {
			t.Fatalf("Check: %v", err)
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
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(maps)) {
		// start-end perms ...; a shared mapping's perms end in 's'
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) != 4 || f[1][3] != 's' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		for c := shmring.MinCapacity; c <= shmring.MaxCapacity; c *= 2 {
			if b-a == uint64(shmring.FileSize(c)) {
				n++
			}
		}
	}
	return n
}
