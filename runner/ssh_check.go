package runner

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sshCheckParallel bounds how many ssh clients CheckHosts runs at once.
const sshCheckParallel = 64

// SSHError reports a failure of the ssh client itself (exit status 255, or
// no answer in time): it could not connect or authenticate, or lost the
// connection.
type SSHError struct {
	Host   string
	Rank   int    // the rank that was running; -1 for CheckHosts
	Stderr string // ssh's last lines of standard error, trimmed
	Err    error  // an *ExitError with Status 255, or why ssh gave no answer
}

// Error formats e as "runner: rank R on HOST: ssh failed: STDERR" (or
// "runner: ssh to HOST failed: ..." without a rank), with Err's text when
// ssh printed nothing.
func (e *SSHError) Error() string {
	if e.Rank < 0 {
		return "runner: ssh to " + e.Host + " failed: " + e.reason()
	}
	return fmt.Sprintf("runner: rank %d on %s: ssh failed: %s", e.Rank, e.Host, e.reason())
}

// reason is what went wrong: ssh's own words, else Err's.
func (e *SSHError) reason() string {
	switch {
	case e.Stderr != "":
		return e.Stderr
	case e.Err != nil:
		return e.Err.Error()
	}
	return "unknown error"
}

// Unwrap returns Err.
func (e *SSHError) Unwrap() error { return e.Err }

// SSHCheckError lists the hosts that CheckHosts could not reach, in the
// order they were given.
type SSHCheckError struct {
	Hosts []*SSHError
}

// Error formats e as
//
//	runner: cannot reach 2 hosts over ssh:
//	  node3: ssh: connect to host node3 port 22: Connection refused
//	  node4: Permission denied (publickey).
func (e *SSHCheckError) Error() string {
	var b strings.Builder
	b.WriteString("runner: cannot reach " + strconv.Itoa(len(e.Hosts)) + " host")
	if len(e.Hosts) != 1 {
		b.WriteString("s")
	}
	b.WriteString(" over ssh:")
	for _, h := range e.Hosts {
		b.WriteString("\n  " + h.Host + ": " + strings.ReplaceAll(h.reason(), "\n", "\n    "))
	}
	return b.String()
}

// Unwrap returns the error of every host.
func (e *SSHCheckError) Unwrap() []error {
	errs := make([]error, len(e.Hosts))
	for i, h := range e.Hosts {
		errs[i] = h
	}
	return errs
}

// CheckHosts runs "ssh ... HOST true" for every host at once (at most 64 at
// a time), each bounded by twice cfg.ConnectTimeout, and returns nil when
// all succeed, else an *SSHCheckError naming each failing host with ssh's own
// message. Hosts listed twice are checked once.
func CheckHosts(ctx context.Context, cfg SSHConfig, hosts []string) error {
	return checkReach(ctx, cfg.withDefaults(), hosts, nil)
}

// sshCheckHost runs "ssh ... host true" and describes its failure.
func sshCheckHost(ctx context.Context, cfg SSHConfig, host string) *SSHError {
	limit := 2 * time.Duration(ceilSeconds(cfg.ConnectTimeout)) * time.Second
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tail := &sshTail{}
	cmd := exec.CommandContext(cctx, cfg.SSHPath, append(cfg.clientArgs(host), "true")...)
	cmd.Stderr = tail
	cmd.WaitDelay = sshWaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := startLocked(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err == nil || errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return sshCheckFailure(ctx, cctx, host, tail.String(), err, limit)
}

// sshCheckFailure describes a check of host that ssh could not run, within
// ctx (the whole check's) and cctx (this host's, limit long): ssh's own
// words (stderr) and err, or why it gave none.
func sshCheckFailure(ctx, cctx context.Context, host, stderr string, err error, limit time.Duration) *SSHError {
	e := &SSHError{Host: host, Rank: -1, Stderr: stderr, Err: err}
	switch {
	case ctx.Err() != nil:
		e.Stderr, e.Err = "", fmt.Errorf("stopped before ssh answered: %w", context.Cause(ctx))
	case cctx.Err() != nil:
		e.Stderr, e.Err = "", fmt.Errorf("no answer within %v", limit)
	}
	return e
}

// sshUnique returns hosts without repeats, in order.
func sshUnique(hosts []string) []string {
	seen := make(map[string]bool, len(hosts))
	var out []string
	for _, h := range hosts {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
