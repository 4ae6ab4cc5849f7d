package shmring

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Create makes a fresh ring of the given capacity (a power of two from
// MinCapacity to MaxCapacity) with a random token and maps it. It returns the
// ring, its memory file and the token. The caller offers the file to its
// peer as OfferPath(f) together with the token, keeps f open until the peer
// has opened it (or refused), then closes it; the mapping stays until
// Unmap. The file never has a name, and its pages are reserved and its size
// sealed before anyone else can reach it (see the package documentation).
func Create(capacity int) (*Ring, *os.File, []byte, error) {
	if !validCapacity(capacity) {
		return nil, nil, nil, fmt.Errorf("shmring: capacity %d is not a power of two from %d to %d", capacity, MinCapacity, MaxCapacity)
	}
	f, err := memfd("gorovod-ring")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("shmring: %w", err)
	}
	if err := prepareFile(f, FileSize(capacity)); err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("shmring: %w", err)
	}
	r, err := mapFile(f, FileSize(capacity))
	if err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("shmring: %w", err)
	}
	token := make([]byte, TokenSize)
	rand.Read(token) // crypto/rand.Read never fails on Linux
	copy(r.mem[offToken:], token)
	return r, f, token, nil
}

// prepareFile makes f private to this user, reserves its pages and seals
// its size. Reserving now matters: memory that runs out later (a full
// memory cgroup) would kill the process with SIGBUS on a write, where a
// failure here only fails Create. The seals stop either side from
// shrinking the file under the other's mapping, which would do the same.
func prepareFile(f *os.File, size int) error {
	fd := int(f.Fd())
	if err := syscall.Fchmod(fd, 0o600); err != nil {
		return os.NewSyscallError("fchmod", err)
	}
	if err := syscall.Fallocate(fd, 0, 0, int64(size)); err != nil {
		return os.NewSyscallError("fallocate", err)
	}
	if _, err := fcntl(fd, fAddSeals, sealShrink|sealGrow|sealSeal); err != nil {
		return os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	return nil
}

// offerFormat is the form of an offer: the creating process's pid and the
// descriptor of its ring's memory file.
const offerFormat = "/proc/%d/fd/%d"

// OfferPath names the memory file f of a ring that this process created,
// for a peer on this host: its descriptor under /proc.
func OfferPath(f *os.File) string {
	return fmt.Sprintf(offerFormat, os.Getpid(), f.Fd())
}

// Open maps the ring that a peer offered (the OfferPath of its file) and
// checks it: a memory file of a ring's size (its capacity is the peer's
// choice), sealed against resizing, that carries token. proc is where the proc filesystem is mounted, the
// directory that stands in for the offer's "/proc": "/proc" but in tests.
// Opening another process's descriptor through /proc works only on this
// host, in the same pid namespace, for the same user: anywhere else Open
// fails.
func Open(proc, offer string, token []byte) (*Ring, error) {
	path, pid, err := offerFile(proc, offer)
	if err != nil {
		return nil, err
	}
	if len(token) != TokenSize {
		return nil, fmt.Errorf("shmring: offer %q: token of %d bytes, want %d", offer, len(token), TokenSize)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shmring: %w", err)
	}
	defer f.Close()
	size, err := checkFile(f)
	if err != nil {
		return nil, fmt.Errorf("shmring: ring %s: %w", path, err)
	}
	r, err := mapFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("shmring: ring %s: %w", path, err)
	}
	if string(r.mem[offToken:offToken+TokenSize]) != string(token) {
		r.Unmap()
		return nil, fmt.Errorf("shmring: ring %s: token mismatch", path)
	}
	r.openWriter(pid)
	return r, nil
}

// offerFile checks that offer has the form OfferPath makes and returns the
// path to open it by, under proc, and the pid of the process it names.
func offerFile(proc, offer string) (string, int, error) {
	var pid, fd int
	_, err := fmt.Sscanf(offer, offerFormat, &pid, &fd)
	if err != nil || pid <= 0 || fd < 0 || fmt.Sprintf(offerFormat, pid, fd) != offer {
		return "", 0, fmt.Errorf("shmring: malformed offer %q", offer)
	}
	return filepath.Join(proc, strconv.Itoa(pid), "fd", strconv.Itoa(fd)), pid, nil
}

// checkFile checks that f is a regular file of a ring's size whose size
// is sealed (which only a memory file can be), and returns the size.
func checkFile(f *os.File) (int, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if !st.Mode().IsRegular() || size < headerBytes || size > int64(FileSize(MaxCapacity)) || !validCapacity(int(size-headerBytes)) {
		return 0, fmt.Errorf("not a ring's file (%v, %d bytes; want %d plus a power of two from %d to %d)",
			st.Mode(), size, headerBytes, MinCapacity, MaxCapacity)
	}
	seals, err := fcntl(int(f.Fd()), fGetSeals, 0)
	if err != nil {
		return 0, os.NewSyscallError("fcntl(F_GET_SEALS)", err)
	}
	if want := sealShrink | sealGrow; seals&want != want {
		return 0, fmt.Errorf("size not sealed (seals %#x)", seals)
	}
	return int(size), nil
}

// mapFile maps the ring file f, of size bytes, shared and writable, with
// every page in place (MAP_POPULATE; Create reserved them). Without it
// each page of the ring faulted in at its first use, in the middle of the
// operations that crossed it: on the 2-CPU test VM four ranks' 4 KiB
// all-reduces as the first size of a launch, which walk every ring's 4
// MiB a message at a time, took 420-880 µs against 46-60 with the pages
// in place (a job of four ranks started about 20 ms later: median 166
// against 146 ms).
func mapFile(f *os.File, size int) (*Ring, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Ring{mem: mem, data: mem[headerBytes:], pidfd: -1}, nil
}

// Unmap removes this process's mapping of the ring. The ring must not be
// used afterwards.
func (r *Ring) Unmap() {
	_ = syscall.Munmap(r.mem)
	r.closeWriter()
}
