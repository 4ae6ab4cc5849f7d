package tcptransport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/tcpopt"
	"github.com/gorovod/gorovod/internal/testutil"
	"github.com/gorovod/gorovod/settings"
)

// congestionOf returns the congestion control algorithm of c.
func congestionOf(t *testing.T, c *net.TCPConn) string {
	t.Helper()
	cc, err := tcpopt.Congestion(c)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// TestSameHostCongestion: every lane of a loopback mesh runs Reno.
func TestSameHostCongestion(t *testing.T) {
	m := meshT(t, 3, Config{})
	for r, tr := range m {
		for peer := range 3 {
			if peer == r {
				continue
			}
			c := tr.Conn(peer).(*conn)
			for _, nc := range []*net.TCPConn{c.out.tcp, c.in.tcp} {
				if got := congestionOf(t, nc); got != sameHostCongestion {
					t.Errorf("rank %d, peer %d: congestion control %q, want %q", r, peer, got, sameHostCongestion)
				}
			}
		}
	}
}

// TestCrossHostCongestion: Config.Congestion sets the congestion control
// of links to other hosts (every link here counts as one, tuning.allCross),
// Reno when unset and the host's default for "host", and leaves same-host
// links on Reno; a name the kernel does not have
// leaves the default and is logged once, however many links meet it; an
// ill-formed name fails Connect with ErrInvalid.
func TestCrossHostCongestion(t *testing.T) {
	lanes := func(m []collective.Transport, each func(r, peer int, nc *net.TCPConn)) {
		for r, tr := range m {
			for peer := range len(m) {
				if peer != r {
					c := tr.Conn(peer).(*conn)
					each(r, peer, c.out.tcp)
					each(r, peer, c.in.tcp)
				}
			}
		}
	}
	m := meshTuned(t, 3, Config{NoSharedMemory: true, Congestion: "cubic"}, tuning{allCross: true})
	lanes(m, func(r, peer int, nc *net.TCPConn) {
		if got := congestionOf(t, nc); got != "cubic" {
			t.Errorf("cross-host: rank %d, peer %d: congestion control %q, want cubic", r, peer, got)
		}
	})
	m = meshTuned(t, 2, Config{NoSharedMemory: true, Congestion: "cubic"}, tuning{})
	lanes(m, func(r, peer int, nc *net.TCPConn) {
		if got := congestionOf(t, nc); got != sameHostCongestion {
			t.Errorf("same host: rank %d, peer %d: congestion control %q, want %q", r, peer, got, sameHostCongestion)
		}
	})

	def, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Fatal(err)
	}
	// Unset, links to other hosts run Reno whatever the host's default;
	// "host" keeps that default.
	m = meshTuned(t, 2, Config{NoSharedMemory: true}, tuning{allCross: true})
	lanes(m, func(r, peer int, nc *net.TCPConn) {
		if got := congestionOf(t, nc); got != crossHostCongestion {
			t.Errorf("unset: rank %d, peer %d: congestion control %q, want %q", r, peer, got, crossHostCongestion)
		}
	})
	m = meshTuned(t, 2, Config{NoSharedMemory: true, Congestion: settings.HostCongestion}, tuning{allCross: true})
	lanes(m, func(r, peer int, nc *net.TCPConn) {
		if got := congestionOf(t, nc); got != strings.TrimSpace(string(def)) {
			t.Errorf("host: rank %d, peer %d: congestion control %q, want the default %q", r, peer, got, def)
		}
	})
	logs := &testutil.SyncBuffer{}
	m = meshTuned(t, 3, Config{NoSharedMemory: true, Congestion: "no_such_cc", Logger: slog.New(slog.NewTextHandler(logs, nil))}, tuning{allCross: true})
	lanes(m, func(r, peer int, nc *net.TCPConn) {
		if got := congestionOf(t, nc); got != strings.TrimSpace(string(def)) {
			t.Errorf("refused: rank %d, peer %d: congestion control %q, want the default %q", r, peer, got, def)
		}
	})
	out := logs.String()
	for r := range 3 {
		if n := strings.Count(out, "rank="+strconv.Itoa(r)+" congestion=no_such_cc"); n != 1 {
			t.Errorf("rank %d logged the refusal %d times, want once:\n%s", r, n, out)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, bad := range []string{"Reno", "bbr2-x", "a_very_long_name_here"} {
		if _, err := localMesh(ctx, 2, Config{Congestion: bad}, tuning{}); !errors.Is(err, collective.ErrInvalid) {
			t.Errorf("Congestion %q: %v, want ErrInvalid", bad, err)
		}
	}
}
