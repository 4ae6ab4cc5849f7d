package tcptransport

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/internal/auth"
	"github.com/gorovod/gorovod/settings"
)

// DefaultHandshakeTimeout bounds the handshake of one connection when
// Config.HandshakeTimeout is zero.
const DefaultHandshakeTimeout = 5 * time.Second

// Config describes this rank's place in the mesh that Connect forms.
type Config struct {
	// Rank is this process's rank, 0 <= Rank < Size.
	Rank int
	// Size is the number of ranks in the job.
	Size int
	// Addrs holds the data-plane address ("host:port") of every rank,
	// indexed by rank. Addrs[Rank] is this rank's Listener address.
	Addrs []string
	// Secret is the 32-byte job secret every connection must prove.
	Secret []byte
	// TLS encrypts every connection: each runs its handshake inside a TLS
	// 1.3 session keyed from Secret (see auth.Guard), and the frames of a
	// link on TCP travel through that session. The rings of a link in
	// shared memory stay as they are. Every rank of a job must set the same
	// value; a rank that meets a peer with the other one fails the
	// connection with an error that says so (auth.ErrMismatch).
	TLS bool
	// HandshakeTimeout bounds the handshake of each connection, accepted or
	// dialed; zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// NoSharedMemory keeps links to peers on this host on TCP. By default a
	// link between two ranks whose addresses have the same host part
	// carries its frames through a ring per direction in shared memory
	// (nameless memory files from memfd_create, which the peer opens
	// through /proc/PID/fd of the offering rank, so no kill leaves a file
	// behind), and its sockets stay open only to tell either side when the
	// other goes away. Where that is not possible (another user or pid
	// namespace, no memory to reserve the ring), the link stays on TCP by
	// itself and the rank logs one line saying why. Every rank of a job
	// must set the same value.
	NoSharedMemory bool
	// Eager lists the peers whose links Connect forms before it returns;
	// the links to the other peers form on first use. Nil means every peer:
	// the full mesh forms at once. Every rank of a job must derive it by
	// the same symmetric rule (if rank a lists b, b lists a), or Connect
	// waits for a dial that never comes; collective.SchedulePeers is such a
	// rule.
	Eager []int
	// Congestion names the congestion control (Linux TCP_CONGESTION:
	// "reno", "cubic", "bbr", ...) of links to peers on other hosts; ""
	// is Reno (see crossHostCongestion), and settings.HostCongestion
	// ("host") keeps the host's default. Links on this host always run
	// Reno (see sameHostCongestion). Where the kernel refuses the name
	// (not built, or not in net.ipv4.tcp_allowed_congestion_control for a
	// process without CAP_NET_ADMIN), the link keeps the default and the
	// rank logs one warning.
	Congestion string
	// Machines holds, where known, the machine of every rank (see
	// jobenv.MachineID: the kernel and the processors it runs on), indexed
	// by rank; nil, or "" for a rank, means unknown. Ranks with equal,
	// non-empty values compete for the same processors whatever their
	// addresses say: network namespaces of one kernel (the emulated hosts
	// of internal/testlab), containers of one node with addresses of their
	// own. A rank counts the ranks that share its processors (those of its
	// host, by address, and of its machine) to choose how it waits for
	// messages (see autoSpin): where they outnumber the processors, no wait
	// polls. Nothing else depends on it; shared memory still follows the
	// addresses.
	Machines []string
	// Logger receives connection events (rejected intruders at Warn); nil
	// discards them. Connect adds a "rank" attribute.
	Logger *slog.Logger
}

// normalize validates c and fills in defaults. Every broken invariant gets
// its own message; errors wrap collective.ErrInvalid.
func (c Config) normalize() (Config, error) {
	switch {
	case c.Size < 1:
		return c, fmt.Errorf("tcptransport: size %d, want at least 1: %w", c.Size, collective.ErrInvalid)
	case c.Rank < 0 || c.Rank >= c.Size:
		return c, fmt.Errorf("tcptransport: rank %d out of range [0, %d): %w", c.Rank, c.Size, collective.ErrInvalid)
	case len(c.Addrs) != c.Size:
		return c, fmt.Errorf("tcptransport: %d addresses for %d ranks: %w", len(c.Addrs), c.Size, collective.ErrInvalid)
	case c.Machines != nil && len(c.Machines) != c.Size:
		return c, fmt.Errorf("tcptransport: %d machines for %d ranks: %w", len(c.Machines), c.Size, collective.ErrInvalid)
	case len(c.Secret) != auth.SecretSize:
		return c, fmt.Errorf("tcptransport: secret is %d bytes, want %d: %w", len(c.Secret), auth.SecretSize, collective.ErrInvalid)
	case c.HandshakeTimeout < 0:
		return c, fmt.Errorf("tcptransport: negative handshake timeout %v: %w", c.HandshakeTimeout, collective.ErrInvalid)
	}
	if err := settings.CheckCongestion(c.Congestion); err != nil {
		return c, fmt.Errorf("tcptransport: %w: %w", err, collective.ErrInvalid)
	}
	for _, p := range c.Eager {
		if p < 0 || p >= c.Size || p == c.Rank {
			return c, fmt.Errorf("tcptransport: eager peer %d of rank %d is not another rank of %d: %w", p, c.Rank, c.Size, collective.ErrInvalid)
		}
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = c.Logger.With("rank", c.Rank)
	return c, nil
}
