package runner

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/gorovod/gorovod/jobenv"
)

// listenAddr returns the host:port the rendezvous service listens on, and
// that ranks dial: BindAddr (port 0 when it has none), else the address of
// NetworkInterface, else (srun) the route to the nodes, else 127.0.0.1.
// Jobs with remote hosts and neither setting choose by route lookups
// instead (see Config.netPlan).
func (c Config) listenAddr() (string, error) {
	switch {
	case c.BindAddr != "":
		host, port, err := splitBindAddr(c.BindAddr)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(host, port), nil
	case c.NetworkInterface != "":
		ip, err := networkInterfaceAddr(c.NetworkInterface)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(ip.String(), "0"), nil
	case c.Launcher == SpawnSrun:
		ip, err := routeToHosts(c.hosts())
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(ip.String(), "0"), nil
	default:
		return "127.0.0.1:0", nil
	}
}

// networkInterfaceAddr is jobenv.InterfaceAddr for --network-interface: its
// errors name the flag, and the interfaces this machine has.
func networkInterfaceAddr(name string) (netip.Addr, error) {
	if _, err := net.InterfaceByName(name); err != nil {
		return netip.Addr{}, fmt.Errorf("%w: --network-interface %s: this machine has no such interface (it has %s)",
			ErrConfig, name, jobenv.InterfaceNames())
	}
	ip, err := jobenv.InterfaceAddr(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: --network-interface %s: the interface has no IPv4 address (nor a global IPv6 one) that other hosts can dial",
			ErrConfig, name)
	}
	return ip, nil
}

// listenError describes why the rendezvous service could not listen on
// addr, naming the flag that chose it. The service's error is flattened to
// text, so it listens there once more for the reason.
func (c Config) listenError(addr string, err error) error {
	reason := err.Error()
	ln, lerr := net.Listen("tcp", addr)
	if lerr == nil {
		_ = ln.Close()
	} else {
		err, reason = lerr, lerr.Error()
	}
	switch {
	case c.BindAddr != "" && errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%w: --bind-addr %s: not an address of this machine (%s)", ErrConfig, c.BindAddr, reason)
	case c.BindAddr != "":
		return fmt.Errorf("%w: --bind-addr %s: cannot listen there (%s)", ErrConfig, c.BindAddr, reason)
	case c.NetworkInterface != "":
		return fmt.Errorf("%w: --network-interface %s: cannot listen on its address %s (%s)", ErrConfig, c.NetworkInterface, addr, reason)
	}
	return fmt.Errorf("runner: rendezvous service: %w", err)
}

// routeToHosts returns the address this machine uses to reach the first of
// hosts that is not this machine; where every host is this machine (or the
// route is loopback), jobenv.UpAddr, else 127.0.0.1. It is the rendezvous address
// of srun-launched ranks, which run on the nodes of an allocation that
// gorun may or may not be part of.
func routeToHosts(hosts []Host) (netip.Addr, error) {
	var others []string
	for _, h := range hosts {
		if !IsLocalHost(h.Name) {
			others = append(others, h.Name)
		}
	}
	ip, err := jobenv.RouteAway(others, true)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: finding the route to node %s: %w (give --bind-addr)", ErrConfig, others[0], err)
	}
	return ip, nil
}
