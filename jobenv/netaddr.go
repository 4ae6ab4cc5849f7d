package jobenv

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// This file picks the addresses a process listens on and reaches others
// from: a worker's data plane (DataPlaneHost) and, on gorun's side, the
// rendezvous service (runner's --bind-addr, --network-interface and srun
// jobs use InterfaceAddr, RouteAway and RouteAddrContext).

// InterfaceNames lists this machine's network interfaces, comma-separated.
func InterfaceNames() string {
	ifcs, err := net.Interfaces()
	if err != nil || len(ifcs) == 0 {
		return "none that can be listed"
	}
	names := make([]string, len(ifcs))
	for i, ifc := range ifcs {
		names[i] = ifc.Name
	}
	return strings.Join(names, ", ")
}

// InterfaceAddr returns the address of the named interface that other hosts
// can dial: its first IPv4 address, else its first global IPv6 address.
func InterfaceAddr(name string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: network interface %q: %w", ErrEnv, name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: network interface %q: %w", ErrEnv, name, err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := prefix.Addr()
		switch {
		case ip.Is4() && !ip.IsLinkLocalUnicast():
			return ip, nil
		case ip.Is6() && !v6.IsValid() && (ip.IsGlobalUnicast() || ip.IsLoopback()):
			v6 = ip
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("%w: network interface %q has no address other hosts can dial", ErrEnv, name)
}

// RouteAway returns the local address of the route to the first of hosts
// whose route is not loopback, trying only the first host when strict (a
// failed route is then an error) and every host otherwise (failures are
// skipped); failing that, UpAddr, else 127.0.0.1.
func RouteAway(hosts []string, strict bool) (netip.Addr, error) {
	for _, h := range hosts {
		ip, err := RouteAddr(h)
		if err != nil && strict {
			return netip.Addr{}, err
		}
		if err == nil && !ip.IsLoopback() {
			return ip, nil
		}
		if strict {
			break
		}
	}
	if ip, ok := UpAddr(); ok {
		return ip, nil
	}
	return netip.MustParseAddr("127.0.0.1"), nil
}

// DataPlaneHost picks the address a worker's data plane listens on:
// bindAddr (GOROVOD_BIND_ADDR) as an address or a network interface name
// (a name that is neither an interface of this host nor resolves is an
// error), else the local address of this host's route to the rendezvous
// at rendezvousAddr: the interface that reaches the rendezvous, which is
// where gorun chose an address that every host reaches, so peers reach
// this rank the way it reaches the rendezvous (not the first interface
// that is up). On gorun's own machine that route is the rendezvous
// address itself. A
// loopback route to a rendezvous that is not named as loopback, in a job
// that spans hosts (allLocal false), means that the rendezvous runs on
// this host (as under Slurm, where rank 0 serves it and a host name may
// resolve to 127.0.1.1): then the route to the first of hints (other hosts
// of the job) that is not loopback, else the first address of an
// interface that is up, else the loopback route.
func DataPlaneHost(bindAddr, rendezvousAddr string, allLocal bool, hints []string) (string, error) {
	if bindAddr != "" {
		if _, err := net.InterfaceByName(bindAddr); err == nil {
			ip, err := InterfaceAddr(bindAddr)
			return ip.String(), err
		}
		if _, err := netip.ParseAddr(bindAddr); err != nil {
			if _, err := net.LookupHost(bindAddr); err != nil {
				return "", fmt.Errorf("%s=%s is neither a network interface of this host (it has %s) nor an address of it (gorun --network-interface needs an interface of that name on every host)",
					EnvBindAddr, bindAddr, InterfaceNames())
			}
		}
		return bindAddr, nil
	}
	rdvHost, _, err := net.SplitHostPort(rendezvousAddr)
	if err != nil {
		return "", err
	}
	ip, err := RouteAddr(rdvHost)
	if err != nil {
		return "", fmt.Errorf("finding a route to the rendezvous at %s: %w", rendezvousAddr, err)
	}
	if !ip.IsLoopback() || isLoopbackName(rdvHost) || allLocal {
		return ip.String(), nil
	}
	away, _ := RouteAway(hints, false)
	if away.IsLoopback() {
		return ip.String(), nil
	}
	return away.String(), nil
}

// isLoopbackName reports whether host names this machine's loopback.
func isLoopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// RouteAddr returns the local address of this machine's route to host (a
// name or an address): the address that host would see its packets come
// from. It sends nothing.
func RouteAddr(host string) (netip.Addr, error) {
	return RouteAddrContext(context.Background(), host)
}

// RouteAddrContext is RouteAddr, its name lookup bounded by ctx: it
// "connects" a UDP socket, which only chooses the route and the source
// address.
func RouteAddrContext(ctx context.Context, host string) (netip.Addr, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", net.JoinHostPort(host, "1"))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// UpAddr returns the InterfaceAddr of the first interface that is up and
// not loopback; ok is false when there is none.
func UpAddr() (ip netip.Addr, ok bool) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, ifc := range ifcs {
		if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagLoopback == 0 {
			if ip, err := InterfaceAddr(ifc.Name); err == nil {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}
