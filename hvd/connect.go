package hvd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// connect registers this rank's data-plane address with the job's
// rendezvous (gorun's, or rank 0's under another launcher), waits for the
// peer table and forms the TCP mesh, all within the start timeout. It
// returns env with the local and cross ranks filled in where the plan
// derives them from the peer table, and the host and machine of every rank.
func connect(ctx context.Context, env jobenv.Env, plan jobenv.JoinPlan, log *slog.Logger) (collective.Transport, *rendezvous.Client, jobenv.Env, placement, error) {
	ctx, cancel := context.WithTimeout(ctx, env.StartTimeout)
	defer cancel()
	where := fmt.Sprintf("hvd: rank %d on %s", env.Rank, env.Hostname)
	if plan.Launcher != jobenv.LauncherGorun && plan.Launcher != "" {
		where += " (" + plan.Launcher + ")"
	}
	rdv, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret, rendezvous.WithLogger(log), rendezvous.WithTLS(env.TLS))
	if err != nil {
		return nil, nil, env, placement{}, fmt.Errorf("%s: joining the rendezvous at %s: %w", where, env.RendezvousAddr, err)
	}
	tr, env, at, err := mesh(ctx, env, plan, rdv, log)
	if err != nil {
		rdv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, env, placement{}, fmt.Errorf("%s: the job did not start within %v: %w", where, env.StartTimeout, err)
		}
		return nil, nil, env, placement{}, fmt.Errorf("%s: %w", where, err)
	}
	return tr, rdv, env, at, nil
}

// placement says where the ranks of a job run, indexed by rank: the host
// each registered, and its machine (jobenv.MachineID; "" where a rank did
// not say).
type placement struct {
	hostOf, machineOf []string
}

func mesh(ctx context.Context, env jobenv.Env, plan jobenv.JoinPlan, rdv *rendezvous.Client, log *slog.Logger) (collective.Transport, jobenv.Env, placement, error) {
	host, err := jobenv.DataPlaneHost(env.BindAddr, env.RendezvousAddr, env.LocalSize == env.Size, plan.RouteHints)
	if err != nil {
		return nil, env, placement{}, err
	}
	ln, err := tcptransport.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, env, placement{}, err
	}
	self := rendezvous.Peer{Rank: env.Rank, Host: env.Hostname, Addr: ln.Addr(), Machine: jobenv.MachineID()}
	if err := rdv.RegisterPeer(ctx, self); err != nil {
		ln.Close()
		return nil, env, placement{}, err
	}
	peers, err := rdv.PeerTable(ctx)
	if err != nil { // stay registered: the others' errors name the ranks that never came, not this one
		ln.Close()
		return nil, env, placement{}, err
	}
	addrs := make([]string, env.Size)
	at := placement{hostOf: make([]string, env.Size), machineOf: make([]string, env.Size)}
	hostOf := at.hostOf
	for _, p := range peers {
		addrs[p.Rank], hostOf[p.Rank], at.machineOf[p.Rank] = p.Addr, p.Host, p.Machine
	}
	if plan.DeriveTopology {
		s := jobenv.SlotsOf(hostOf)[env.Rank]
		env.LocalRank, env.LocalSize, env.CrossRank, env.CrossSize = s.LocalRank, s.LocalSize, s.CrossRank, s.CrossSize
	}
	// The links the schedules use form now; the others (all-to-all's, a
	// barrier's) on first use, so that a rank holds O(log size) links
	// and shared-memory rings rather than size-1.
	tr, err := tcptransport.Connect(ctx, ln, tcptransport.Config{
		Rank: env.Rank, Size: env.Size, Addrs: addrs, Secret: env.Secret, Logger: log,
		NoSharedMemory: env.NoSharedMemory, TLS: env.TLS, Congestion: env.TCPCongestion, Machines: at.machineOf,
		Eager: collective.SchedulePeers(env.Rank, env.Size, hostIndexes(hostOf)),
	})
	if err != nil {
		leave(rdv, log)
	}
	return tr, env, at, err
}

// leaveTimeout bounds telling the rendezvous that a registration is void.
const leaveTimeout = 2 * time.Second

// leave tells the rendezvous that this rank's registration is void: its
// runtime shut down, or its mesh did not form after the peer table came.
// The rank's next Init then registers anew and starts (or joins) the next
// round, in which every rank forms a new mesh. Best effort, bounded by
// leaveTimeout: a launcher that is gone or aborted the job has nothing
// left to learn, so a failure is only logged at debug level.
func leave(rdv *rendezvous.Client, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := rdv.Leave(ctx); err != nil {
		log.Debug("hvd: leaving the rendezvous", "err", err)
	}
}
