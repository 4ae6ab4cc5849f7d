package launchtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testlab"
)

// TestLabTLSHidesTraffic runs a 2-rank job across two emulated hosts while
// a passive sniffer records every frame on host1's link (the root
// namespace's end of its veth pair, which carries the data plane to host2
// and the rendezvous to gorun). The job broadcasts a tensor filled with a
// fresh marker and stores another in the rendezvous (testdata/tlsmarker).
// Without --tls both markers are on the wire, which shows the sniffer sees
// the job's bytes; with --tls neither is.
func TestLabTLSHidesTraffic(t *testing.T) {
	lab := testlab.Start(t, testlab.Options{Hosts: 2, Rate: "2gbit"})
	prog := filepath.Join(t.TempDir(), "tlsmarker")
	if out, err := exec.Command("go", "build", "-o", prog, "./testdata/tlsmarker").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/tlsmarker: %v\n%s", err, out)
	}
	for _, useTLS := range []bool{false, true} {
		name := "plain"
		if useTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var nonce [8]byte
			rand.Read(nonce[:])
			marker := "gorovod-marker-" + hex.EncodeToString(nonce[:])
			s, err := sniff(lab.Hosts[0].Veth)
			if err != nil {
				t.Fatalf("sniffer on %s: %v", lab.Hosts[0].Veth, err)
			}
			argv := append([]string{bin(t, "gorun"), "-np", "2", "-H", lab.HostsFlag(1)}, lab.GorunArgs()...)
			if useTLS {
				argv = append(argv, "--tls")
			}
			r := run(t, command(context.Background(), lab.GorunEnv(), append(argv, prog, marker)...))
			wire := s.stop()
			mustSucceed(t, "gorun tlsmarker", r)
			if n := strings.Count(r.stdout, fmt.Sprintf("tls=%v ok", useTLS)); n != 2 {
				t.Fatalf("%d ranks report success with tls=%v:\n%s\n%s", n, useTLS, r.stdout, r.stderr)
			}
			if len(wire) < 1<<20 {
				t.Fatalf("the sniffer recorded %d bytes, less than the broadcast alone", len(wire))
			}
			for _, m := range []string{marker + "-data", marker + "-kv"} {
				if got := bytes.Contains(wire, []byte(m)); got == useTLS {
					t.Errorf("--tls=%v: %q on the wire: %v (%d bytes recorded)", useTLS, m, got, len(wire))
				}
			}
		})
	}
}

// sniffer records every frame an interface sends or receives, through an
// AF_PACKET socket (root only), until stop.
type sniffer struct {
	fd   int
	mu   sync.Mutex
	seen bytes.Buffer
	quit chan struct{}
	done chan struct{}
}

// sniff starts recording the frames of the interface named ifname.
func sniff(ifname string) (*sniffer, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, err
	}
	proto := htons(syscall.ETH_P_ALL)
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(proto))
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// Room for the whole job's traffic, so that a reader slowed down (by
	// the race detector, a busy machine) drops nothing; root may exceed
	// net.core.rmem_max.
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 256<<20); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	tv := syscall.NsecToTimeval(int64(100 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	s := &sniffer{fd: fd, quit: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

// loop reads frames until stop, and then what the socket still holds: a
// read times out every 100 ms, and one that does after stop ends it.
func (s *sniffer) loop() {
	defer close(s.done)
	buf := make([]byte, 256<<10)
	for {
		n, _, err := syscall.Recvfrom(s.fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				select {
				case <-s.quit:
					return
				default:
				}
			}
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
		s.mu.Lock()
		s.seen.Write(buf[:n])
		s.mu.Unlock()
	}
}

// stop ends the recording and returns every byte recorded.
func (s *sniffer) stop() []byte {
	close(s.quit)
	<-s.done
	syscall.Close(s.fd)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen.Bytes()
}

// htons turns a 16-bit value into network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
