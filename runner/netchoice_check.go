package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// This file holds the connect-back check's verdicts: a host that cannot
// reach gorun's rendezvous service at the address chosen for it. The
// check itself runs twice during start-up: in the ssh preflight, where each
// host opens a TCP connection to that address before any rank starts
// (ReachChecker, netchoice_ssh.go), and in the ranks' own registration,
// which points at hosts the preflight could not check (or whose ranks
// start but are stopped on the way, a firewall for instance): see
// unregisteredHosts.

// ConnectBackError reports a host that cannot open a connection to gorun's
// rendezvous service at the address its ranks were to dial. Its message
// names the flags that choose another address. It wraps ErrConfig: the
// rendezvous address could not be worked out.
type ConnectBackError struct {
	Host   string // the host, as the job names it
	Addr   string // the host:port it tried
	Reason string // what went wrong, in the host's words where it told
}

// Error formats e as
//
//	runner: host node2 cannot connect back to gorun at 10.0.0.1:41234: REASON;
//	give gorun --bind-addr with an address of this machine that node2 can
//	reach, or --network-interface with the interface that leads to it
//
// (on one line).
func (e *ConnectBackError) Error() string {
	return fmt.Sprintf("runner: host %s cannot connect back to gorun at %s: %s; give gorun --bind-addr with an address of this machine that %s can reach, or --network-interface with the interface that leads to it",
		e.Host, e.Addr, e.Reason, e.Host)
}

// Unwrap returns ErrConfig.
func (e *ConnectBackError) Unwrap() error { return ErrConfig }

// UnregisteredHostError reports a remote host none of whose ranks
// registered with gorun's rendezvous within the start timeout while other
// ranks did. Its ranks may not reach gorun at the address chosen for the
// host (the ssh preflight checks that only where the host has bash, nc or
// python3), or may be slow to reach hvd.Init; the message says both, so
// unlike *ConnectBackError it does not wrap ErrConfig, and the job's own
// failure decides gorun's exit status.
type UnregisteredHostError struct {
	Host    string        // the host, as the job names it
	Addr    string        // the host:port its ranks were to dial
	Timeout time.Duration // the start timeout
}

// Error formats e as
//
//	runner: no rank on host node2 registered within the start timeout (30s);
//	if they cannot connect back to gorun at 10.0.0.1:41234, give gorun
//	--bind-addr with an address of this machine that node2 can reach, or
//	--network-interface with the interface that leads to it
//
// (on one line).
func (e *UnregisteredHostError) Error() string {
	return fmt.Sprintf("runner: no rank on host %s registered within the start timeout (%v); if they cannot connect back to gorun at %s, give gorun --bind-addr with an address of this machine that %s can reach, or --network-interface with the interface that leads to it",
		e.Host, e.Timeout, e.Addr, e.Host)
}

// registrations is what unregisteredHosts reads of the rendezvous service.
type registrations interface {
	Registered() int
	Missing() []rendezvous.Peer
	Round() int
}

// unregisteredHosts explains a failed job whose remote hosts never
// joined it. When err is a failure (not an interruption) that came at
// least timeout (the start timeout) after the ranks started, in the first
// round of the rendezvous, with some rank registered, then each remote
// host none of whose ranks registered gets an *UnregisteredHostError
// (their ranks could not reach addrOf(host) within their start timeout,
// were slow to join, or were never run), and those come first, joined
// with err. Otherwise it returns err.
// A job whose program never joins (no rank registered) is left alone.
func unregisteredHosts(err error, srv registrations, slots []Slot, addrOf func(string) string, elapsed, timeout time.Duration) error {
	if err == nil || errors.Is(err, ErrInterrupted) || elapsed < timeout || srv.Round() != 1 || srv.Registered() == 0 {
		return err
	}
	missing := make(map[string]int)
	for _, p := range srv.Missing() {
		missing[p.Host]++
	}
	var errs []error
	for _, h := range UsedHosts(slots) {
		if missing[h.Name] == h.Slots && !IsLocalHost(h.Name) {
			errs = append(errs, &UnregisteredHostError{Host: h.Name, Addr: addrOf(h.Name), Timeout: timeout})
		}
	}
	if errs == nil {
		return err
	}
	return errors.Join(append(errs, err)...)
}
