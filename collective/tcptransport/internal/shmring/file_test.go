package shmring

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestCreateLeavesNoName: the file behind a new ring has no link in any
// directory from the moment it exists, belongs to this user alone, cannot
// be shrunk, and a peer reaches it only through the creating process's
// descriptor, with the right token.
func TestCreateLeavesNoName(t *testing.T) {
	r, f, token, err := Create(MaxCapacity)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("ring file: %d links, mode %#o; want 0 links, mode 0600", st.Nlink, st.Mode&0o777)
	}
	peer, err := Open("/proc", OfferPath(f), token)
	if err != nil {
		t.Fatal(err)
	}
	peer.Unmap()
	if _, err := Open("/proc", OfferPath(f), make([]byte, TokenSize)); err == nil {
		t.Error("a ring opened with the wrong token")
	}
	if err := syscall.Ftruncate(int(f.Fd()), 4096); err == nil {
		t.Error("a ring file could be shrunk under its mappings")
	}
}

// TestOpenRejects: Open refuses offers of another form, tokens of the
// wrong size, files that are not rings and offers it cannot reach under
// proc, saying which.
func TestOpenRejects(t *testing.T) {
	r, f, token, err := Create(MaxCapacity)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	defer f.Close()
	offer := OfferPath(f)
	for _, c := range []struct {
		proc, offer string
		token       []byte
		want        string
	}{
		{"/proc", "/etc/passwd", token, "malformed offer"},
		{"/proc", offer + "/..", token, "malformed offer"},
		{"/proc", "/proc/0/fd/3", token, "malformed offer"},
		{"/proc", offer, token[:5], "token of 5 bytes"},
		{"/proc", "/proc/self/fd/0", token, "malformed offer"},
		{"/proc", strings.Replace(offer, "/fd/", "/fd/9", 1), token, "shmring: "},
		{"/nonexistent/dir", offer, token, "/nonexistent/dir/"},
	} {
		if _, err := Open(c.proc, c.offer, c.token); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q, %q): %v, want an error containing %q", c.proc, c.offer, err, c.want)
		}
	}
}

// TestCapacities: a ring holds what its creator chose, a power of two from
// MinCapacity to MaxCapacity; the peer learns it from the file; anything
// else is refused, on either side.
func TestCapacities(t *testing.T) {
	for _, c := range []int{MinCapacity, 1 << 20, MaxCapacity} {
		r, f, token, err := Create(c)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := Open("/proc", OfferPath(f), token)
		if err != nil {
			t.Fatal(err)
		}
		if r.Capacity() != c || peer.Capacity() != c {
			t.Errorf("capacity %d: creator sees %d, peer %d", c, r.Capacity(), peer.Capacity())
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Size != int64(FileSize(c)) {
			t.Errorf("capacity %d: file of %d bytes (%v), want %d", c, st.Size, err, FileSize(c))
		}
		peer.Unmap()
		r.Unmap()
		f.Close()
	}
	for _, c := range []int{0, -1, MinCapacity / 2, MinCapacity + 1, 3 << 20, 2 * MaxCapacity} {
		if _, _, _, err := Create(c); err == nil || !strings.Contains(err.Error(), "is not a power of two") {
			t.Errorf("Create(%d): %v, want a refusal", c, err)
		}
	}
	// A sealed memory file of another size is not a ring.
	f, err := memfd("not-a-ring")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := prepareFile(f, FileSize(MinCapacity)+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/proc", OfferPath(f), make([]byte, TokenSize)); err == nil || !strings.Contains(err.Error(), "not a ring's file") {
		t.Errorf("Open of a file of %d bytes: %v, want a refusal", FileSize(MinCapacity)+1, err)
	}
}

// TestMappingsArePopulated: both the creator's and the peer's mapping of
// a ring have every page in place from the start (see mapFile), as the
// kernel counts them in /proc/self/smaps.
func TestMappingsArePopulated(t *testing.T) {
	r, f, token, err := Create(MaxCapacity)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unmap()
	defer f.Close()
	peer, err := Open("/proc", OfferPath(f), token)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Unmap()
	for _, m := range []*Ring{r, peer} {
		rss, err := mappedKiB(m.mem)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(m.mem) >> 10; rss < want {
			t.Errorf("mapping at %p: %d KiB in place, want %d", &m.mem[0], rss, want)
		}
	}
}

// mappedKiB returns the Rss that /proc/self/smaps gives the mapping that
// starts at mem.
func mappedKiB(mem []byte) (int, error) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&mem[0])))
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = strings.HasPrefix(f[0], start)
			continue
		}
		if in && strings.HasPrefix(l, "Rss:") {
			return strconv.Atoi(strings.Fields(l)[1])
		}
	}
	return 0, fmt.Errorf("no mapping at %s in /proc/self/smaps", start)
}
