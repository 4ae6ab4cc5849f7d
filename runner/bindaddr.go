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
		ip, err := interfaceAddr(c.NetworkInterface)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(ip.String(), "0"), nil
	default:
		return "127.0.0.1:0", nil
	}
}

// interfaceAddr returns the address of the named interface that other hosts
// can dial: its first IPv4 address, else its first global IPv6 address.
func interfaceAddr(name string) (netip.Addr, error) {
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
