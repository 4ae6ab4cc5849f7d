package hvd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/gorovod/gorovod/collective"
	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/runner"
	"github.com/gorovod/gorovod/runner/rendezvous"
)

// connect registers this rank's data-plane address with the launcher's
// rendezvous, waits for the peer table and forms the TCP mesh, all within
// the start timeout.
func connect(ctx context.Context, env runner.WorkerEnv, log *slog.Logger) (collective.Transport, *rendezvous.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, env.StartTimeout)
	defer cancel()
	where := fmt.Sprintf("hvd: rank %d on %s", env.Rank, env.Hostname)
	rdv, err := rendezvous.Dial(ctx, env.RendezvousAddr, env.Secret, rendezvous.WithLogger(log))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: joining the launcher at %s: %w", where, env.RendezvousAddr, err)
	}
	tr, err := mesh(ctx, env, rdv, log)
	if err != nil {
		rdv.Close()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("%s: the job did not start within %v: %w", where, env.StartTimeout, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	return tr, rdv, nil
}

func mesh(ctx context.Context, env runner.WorkerEnv, rdv *rendezvous.Client, log *slog.Logger) (collective.Transport, error) {
	host, err := bindHost(env)
	if err != nil {
		return nil, err
	}
	ln, err := tcptransport.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	if err := rdv.Register(ctx, env.Rank, env.Hostname, ln.Addr()); err != nil {
		ln.Close()
		return nil, err
	}
	peers, err := rdv.PeerTable(ctx)
	if err != nil {
		ln.Close()
		return nil, err
	}
	addrs := make([]string, env.Size)
	for _, p := range peers {
		addrs[p.Rank] = p.Addr
	}
	return tcptransport.Connect(ctx, ln, tcptransport.Config{
		Rank: env.Rank, Size: env.Size, Addrs: addrs, Secret: env.Secret, Logger: log,
		DisableSharedMemory: env.NoSharedMemory,
	})
}

// bindHost picks the address the data plane listens on: GOROVOD_BIND_ADDR
// as an address or a network interface name, else the local address this
// host uses to reach the launcher (so peers can reach it the same way).
func bindHost(env runner.WorkerEnv) (string, error) {
	if b := env.BindAddr; b != "" {
		if ifc, err := net.InterfaceByName(b); err == nil {
			return interfaceAddr(ifc)
		}
		return b, nil
	}
	c, err := net.Dial("udp", env.RendezvousAddr) // sends nothing: only picks a route
	if err != nil {
		return "", fmt.Errorf("finding a route to the launcher at %s: %w", env.RendezvousAddr, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

func interfaceAddr(ifc *net.Interface) (string, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", ifc.Name)
}
