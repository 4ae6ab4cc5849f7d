package runner

import (
	"fmt"
	"net"
	"net/netip"
)

// listenAddr returns the host:port the rendezvous service listens on, and
// that ranks dial: BindAddr (port 0 when it has none), else the address of
// NetworkInterface, else 127.0.0.1 (Validate ensures every host is then
// local).
func (c Config) listenAddr() (string, error) {
	switch {
	case c.BindAddr != "":
		host, port, err := splitBindAddr(c.BindAddr)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(host, port), nil
	case c.NetworkInterface != "":
		ip, err := InterfaceAddr(c.NetworkInterface)
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

// InterfaceAddr returns the address of the named interface that other hosts
// can dial: its first IPv4 address, else its first global IPv6 address.
func InterfaceAddr(name string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: network interface %q: %w", ErrConfig, name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: network interface %q: %w", ErrConfig, name, err)
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
	return netip.Addr{}, fmt.Errorf("%w: network interface %q has no address other hosts can dial", ErrConfig, name)
}

// routeToHosts returns the address this machine uses to reach the first of
// hosts that is not this machine; where every host is this machine (or the
// route is loopback), UpAddr, else 127.0.0.1. It is the rendezvous address
// of srun-launched ranks, which run on the nodes of an allocation that
// gorun may or may not be part of.
func routeToHosts(hosts []Host) (netip.Addr, error) {
	for _, h := range hosts {
		if IsLocalHost(h.Name) {
			continue
		}
		ip, err := RouteAddr(h.Name)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("%w: finding the route to node %s: %w (give --bind-addr)", ErrConfig, h.Name, err)
		}
		if !ip.IsLoopback() {
			return ip, nil
		}
		break
	}
	if ip, ok := UpAddr(); ok {
		return ip, nil
	}
	return netip.MustParseAddr("127.0.0.1"), nil
}

// RouteAddr returns the local address of this machine's route to host (a
// name or an address): the address that host would see its packets come
// from. It sends nothing.
func RouteAddr(host string) (netip.Addr, error) {
	c, err := net.Dial("udp", net.JoinHostPort(host, "1"))
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
