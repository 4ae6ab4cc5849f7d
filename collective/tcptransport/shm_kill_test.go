package tcptransport

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective/tcptransport/internal/shmring"
)

// shmHelperEnv carries the job secret (hex) to TestShmHelperProcess; it is
// set only in the helper processes that TestShmKilledMidHandshakeLeavesNoFile
// starts.
const shmHelperEnv = "GOROVOD_TEST_SHM_HELPER_SECRET"

// TestShmKilledMidHandshakeLeavesNoFile kills a rank with SIGKILL in the
// middle of the shared-memory handshake, at each point where it holds a
// ring it has offered but whose fate it does not know yet: once it has
// offered it, and once it has also answered its peer's offer. The ring it
// offered must have no name in any directory while it lives, and nothing
// it made may be left afterwards. The rank is a helper process (rank 0 of
// two); the test plays rank 1 on the raw sockets.
func TestShmKilledMidHandshakeLeavesNoFile(t *testing.T) {
	for _, stage := range []string{"offered", "answered"} {
		t.Run(stage, func(t *testing.T) { killMidHandshake(t, stage) })
	}
}

// killMidHandshake runs one case of TestShmKilledMidHandshakeLeavesNoFile.
func killMidHandshake(t *testing.T, stage string) {
	secret := secretOf(9)
	helper, addr := startShmHelper(t, secret)
	out, in, err := fakePeer(t, addr, secret, 1, 2)
	if err != nil {
		t.Fatalf("forming the link with the helper: %v", err)
	}
	offer, err := readRawOffer(in)
	if err != nil {
		t.Fatalf("reading the helper's ring offer: %v", err)
	}
	if stage == "answered" {
		if err := answerEmpty(out, in); err != nil {
			t.Fatalf("offering the helper no ring: %v", err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(offer, &st); err != nil {
		t.Fatalf("the helper offered %q, which cannot be reached: %v", offer, err)
	}
	named := namedRings(t, helper.Process.Pid)
	if st.Nlink != 0 {
		t.Errorf("the offered ring %s has %d link(s): a kill now leaves it behind", offer, st.Nlink)
		named = append(named, offer)
	}
	helper.Process.Kill()
	helper.Wait()
	for _, path := range named {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s is left behind after SIGKILL", path)
			os.Remove(path) // keep the host clean where the test fails
		}
	}
}

// namedRings returns the files with a name from which process pid maps
// rings, reporting each as an error.
func namedRings(t *testing.T, pid int) []string {
	t.Helper()
	rings, err := ringMappings(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(rings) == 0 {
		t.Fatalf("process %d maps no ring", pid)
	}
	var out []string
	for _, path := range rings {
		if named(path) {
			t.Errorf("the helper maps a ring from %s, which has a name", path)
			out = append(out, path)
		}
	}
	return out
}

// startShmHelper starts TestShmHelperProcess as rank 0 of a two-rank job
// with secret and returns it and its data-plane address. It is killed when
// t ends, and with the test process.
func startShmHelper(t *testing.T, secret []byte) (*exec.Cmd, string) {
	t.Helper()
	return startHelperProcess(t, "TestShmHelperProcess", shmHelperEnv+"="+hex.EncodeToString(secret))
}

// startHelperProcess runs the test binary's test name alone, with env
// added to its environment, and returns it and the address it prints on a
// line "addr=...". It is killed when t ends, and with the test process.
func startHelperProcess(t *testing.T, name, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "addr="); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatalf("the helper %s did not say where it listens within 30s", name)
		return nil, ""
	}
}

// TestShmHelperProcess is rank 0 of a two-rank job whose rank 1 is the test
// that started it (see startShmHelper); it forms its mesh and waits to be
// killed. Run any other way, it skips.
func TestShmHelperProcess(t *testing.T) {
	secret, err := hex.DecodeString(os.Getenv(shmHelperEnv))
	if err != nil || len(secret) == 0 {
		t.Skip("a helper process of TestShmKilledMidHandshakeLeavesNoFile")
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("addr=%s\n", ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Size: 2, Addrs: []string{ln.Addr(), "127.0.0.1:1"}, Secret: secret, HandshakeTimeout: time.Minute}
	tr, err := Connect(ctx, ln, cfg)
	if tr != nil {
		tr.Close()
	}
	t.Fatalf("the helper was not killed (Connect: %v)", err)
}

// readRawOffer reads a ring offer from the wire (a 2-byte little-endian
// length, the path, the token) and returns its path.
func readRawOffer(c net.Conn) (string, error) {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, int(binary.LittleEndian.Uint16(n[:]))+shmring.TokenSize)
	if len(b) == shmring.TokenSize {
		return "", fmt.Errorf("the helper offered no ring")
	}
	if _, err := io.ReadFull(c, b); err != nil {
		return "", err
	}
	return string(b[:len(b)-shmring.TokenSize]), nil
}

// answerEmpty offers the helper no ring on out and reads its answer on in.
func answerEmpty(out, in net.Conn) error {
	if _, err := out.Write([]byte{0, 0}); err != nil {
		return err
	}
	var v [1]byte
	_, err := io.ReadFull(in, v[:])
	return err
}

// ringMappings returns the file of every shared mapping of process pid that
// has a ring's size, as /proc/<pid>/maps names it.
func ringMappings(pid int) ([]string, error) {
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(maps)) {
		// start-end perms offset dev inode path (which may hold spaces)
		f := strings.SplitN(strings.TrimSpace(line), " ", 6)
		if len(f) < 6 || len(f[1]) != 4 || f[1][3] != 's' {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		for c := shmring.MinCapacity; c <= shmring.MaxCapacity; c *= 2 {
			if b-a == uint64(shmring.FileSize(c)) {
				out = append(out, strings.TrimSpace(f[5]))
			}
		}
	}
	return out, nil
}

// named reports whether a file that /proc/<pid>/maps names as path still
// has a name in some directory (the kernel marks the others "(deleted)").
func named(path string) bool {
	return path != "" && !strings.HasSuffix(path, " (deleted)")
}
