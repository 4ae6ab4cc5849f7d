package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/internal/shellquote"
)

// The ssh side of the connect-back check: the preflight runs a probe on
// every host, in the same ssh connection that checks the host answers, and
// the probe opens a TCP connection to gorun's rendezvous service.

// probeMarker is the probe's first line of output: the remote shell runs,
// so a failure after it is the connection back, not ssh.
const probeMarker = "gorovod-probe"

// probeNoTool is the probe's exit status when the host has no tool to
// open a TCP connection with: the check is left to the ranks.
const probeNoTool = 97

// timeoutStatus is the exit status of coreutils' timeout(1) when the
// command ran out of time.
const timeoutStatus = 124

// probeScript is the script that the remote /bin/sh runs, with positional
// parameters ADDR PORT SECONDS. It prints probeMarker, then opens a TCP
// connection to ADDR:PORT and closes it, with the first tool it finds:
// bash's /dev/tcp (bounded by coreutils' timeout where there is one), nc
// -z, or python3; its status is that tool's (timeoutStatus when the
// connection took longer than SECONDS), probeNoTool without any.
const probeScript = `echo ` + probeMarker + `; a=$1; p=$2; t=$3
if command -v bash >/dev/null 2>&1; then
  if command -v timeout >/dev/null 2>&1; then
    exec timeout "$t" bash -c 'exec 3<>"/dev/tcp/$1/$2"' bash "$a" "$p"
  fi
  exec bash -c 'exec 3<>"/dev/tcp/$1/$2"' bash "$a" "$p"
fi
if command -v nc >/dev/null 2>&1; then
  exec nc -z -w "$t" "$a" "$p"
fi
if command -v python3 >/dev/null 2>&1; then
  exec python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3])).close()' "$a" "$p" "$t"
fi
exit 97` // probeNoTool

// probeCommand is the remote command that runs probeScript for addr
// (host:port), waiting at most wait seconds for the connection.
func probeCommand(addr string, wait int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return "exec /bin/sh -c " + shellquote.Quote(probeScript) + " " + probeMarker + " " +
		shellquote.Quote(host) + " " + shellquote.Quote(port) + " " + strconv.Itoa(wait), nil
}

// CheckReach checks that every host answers over ssh, as CheckHosts does,
// and that each host with an address in addrs opens a TCP connection to it
// (its probe runs in the same ssh session, with bash's /dev/tcp, nc or
// python3, whichever the host has first; a host with none passes). Each
// connection may take the ssh ConnectTimeout, each host three times that in
// all. ssh failures come back as an *SSHCheckError, as from CheckHosts;
// hosts that could not connect as *ConnectBackErrors, joined after it. It
// makes the spawner a ReachChecker.
func (sp *sshSpawner) CheckReach(ctx context.Context, hosts []string, addrs map[string]string) error {
	return checkReach(ctx, sp.cfg, hosts, addrs)
}

// checkReach runs sshProbeHost on every host at once (at most
// sshCheckParallel at a time); see CheckReach and, with no addrs,
// CheckHosts.
func checkReach(ctx context.Context, cfg SSHConfig, hosts []string, addrs map[string]string) error {
	hosts = sshUnique(hosts)
	sshErrs := make([]*SSHError, len(hosts))
	backErrs := make([]error, len(hosts))
	inParallel(len(hosts), sshCheckParallel, func(i int) {
		sshErrs[i], backErrs[i] = sshProbeHost(ctx, cfg, hosts[i], addrs[hosts[i]])
	})
	var failed []*SSHError
	for _, e := range sshErrs {
		if e != nil {
			failed = append(failed, e)
		}
	}
	var errs []error
	if failed != nil {
		errs = append(errs, &SSHCheckError{Hosts: failed})
	}
	return errors.Join(append(errs, backErrs...)...)
}

// sshProbeHost runs the probe for addr on host ("ssh ... host true" when
// addr is ""), and returns ssh's failure, or the host's failure to connect
// (a *ConnectBackError), or neither.
func sshProbeHost(ctx context.Context, cfg SSHConfig, host, addr string) (*SSHError, error) {
	if addr == "" {
		return sshCheckHost(ctx, cfg, host), nil
	}
	wait := ceilSeconds(cfg.ConnectTimeout)
	remote, err := probeCommand(addr, wait)
	if err != nil {
		return nil, &ConnectBackError{Host: host, Addr: addr, Reason: err.Error()}
	}
	limit := 3 * time.Duration(wait) * time.Second
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stdout, stderr := &sshTail{}, &sshTail{}
	cmd := exec.CommandContext(cctx, cfg.SSHPath, append(cfg.clientArgs(host), remote)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = sshWaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err = startLocked(cmd); err == nil {
		err = cmd.Wait()
	}
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil, nil
	}
	ranProbe := strings.HasPrefix(stdout.String(), probeMarker)
	ee, exited := errors.AsType[*exec.ExitError](err)
	switch {
	case !ranProbe:
		return sshCheckFailure(ctx, cctx, host, stderr.String(), err, limit), nil
	case exited && ee.ExitCode() == probeNoTool:
		return nil, nil
	case ctx.Err() != nil:
		return nil, &ConnectBackError{Host: host, Addr: addr, Reason: "no connection before the start timeout"}
	case cctx.Err() != nil || exited && ee.ExitCode() == timeoutStatus:
		return nil, &ConnectBackError{Host: host, Addr: addr, Reason: fmt.Sprintf("no connection within %ds", wait)}
	}
	return nil, &ConnectBackError{Host: host, Addr: addr, Reason: probeReason(stderr.String(), err)}
}

// probeReason is the gist of a failed probe's standard error: what its
// last line says after the last ": ", the system's words once the tool's
// prefix and the address are gone (bash's "bash: line 1:
// /dev/tcp/ADDR/PORT: No route to host", nc's "nc: connect to ADDR port
// PORT (tcp) failed: Connection refused", python's
// "ConnectionRefusedError: [Errno 111] Connection refused"); err's text
// when it printed nothing.
func probeReason(stderr string, err error) string {
	line := stderr[strings.LastIndexByte(stderr, '\n')+1:]
	if i := strings.LastIndex(line, ": "); i >= 0 {
		line = line[i+2:]
	}
	if line == "" {
		return err.Error()
	}
	return line
}

// resolveHostTimeout bounds "ssh -G", and maxResolveOutput what it may
// print (OpenSSH prints a few KiB): an ssh that prints more is stopped, as
// if it had failed.
const (
	resolveHostTimeout = 5 * time.Second
	maxResolveOutput   = 256 << 10
)

// errOutputTooLarge is cappedBuffer's error past its max.
var errOutputTooLarge = errors.New("output larger than its limit")

// cappedBuffer keeps what is written to it, up to max bytes; a write past
// max fails (so that exec stops copying and closes the pipe).
type cappedBuffer struct {
	buf []byte
	max int
}

// Write appends p, or fails with errOutputTooLarge when it does not fit.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) > b.max {
		return 0, errOutputTooLarge
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// resolveHost returns the HostName that ssh's configuration gives host
// ("ssh -G", which connects nowhere), or "" when ssh cannot tell. It makes
// the spawner a hostResolver: an alias of ~/.ssh/config is looked up where
// ssh really connects.
func (sp *sshSpawner) resolveHost(ctx context.Context, host string) string {
	ctx, cancel := context.WithTimeout(ctx, resolveHostTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sp.cfg.SSHPath, append([]string{"-G"}, sp.cfg.clientArgs(host)...)...)
	cmd.WaitDelay = sshWaitDelay
	var out cappedBuffer
	out.max = maxResolveOutput
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(out.buf))
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "hostname "); ok {
			return strings.TrimSpace(name)
		}
	}
	return ""
}
