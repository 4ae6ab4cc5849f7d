package runner

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Defaults of SSHConfig.
const (
	DefaultSSHPath        = "ssh"
	DefaultSSHGracePeriod = 5 * time.Second
)

// sshWaitDelay bounds how long Wait keeps reading ssh's output after the
// client exited, when something it started (a ControlPersist master, a
// ProxyCommand) still holds its pipes.
const sshWaitDelay = 2 * time.Second

// SSHConfig says how to reach remote hosts with the OpenSSH client. Every
// other setting (user name, known hosts, jump hosts, multiplexing) comes
// from the user's ~/.ssh/config, as for a plain ssh command; host keys are
// checked as ssh's configuration says (StrictHostKeyChecking is not turned
// off: a new host must be in known_hosts, for example with ssh-keyscan).
type SSHConfig struct {
	// Port is the ssh port of the remote hosts (-p); 0 means ssh's default.
	Port int
	// IdentityFile is the private key to use (-i); "" means ssh's default.
	IdentityFile string
	// ConnectTimeout bounds connecting and the ssh handshake
	// (-o ConnectTimeout, whole seconds, rounded up); 0 means 10s. CheckHosts
	// gives each host twice this in all.
	ConnectTimeout time.Duration
	// ForwardEnv lists extra variables for every rank (gorun -x): "NAME"
	// passes gorun's value (nothing when unset), "NAME=value" sets one. It
	// overrides the deny list of NewSSHSpawner. GOROVOD_SECRET is never
	// forwarded this way.
	ForwardEnv []string
	// GracePeriod is how long a remote rank has, once told to stop, between
	// SIGTERM and SIGKILL (whole seconds, rounded up); 0 means 5s.
	GracePeriod time.Duration
	// SSHPath is the ssh client to run; "" means "ssh" from PATH.
	SSHPath string
	// ExtraArgs are passed to ssh before the host name, for example
	// "-o", "UserKnownHostsFile=/path" in tests.
	ExtraArgs []string
}

// withDefaults returns c with zero fields set to their defaults.
func (c SSHConfig) withDefaults() SSHConfig {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultSSHConnectTimeout
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = DefaultSSHGracePeriod
	}
	if c.SSHPath == "" {
		c.SSHPath = DefaultSSHPath
	}
	return c
}

// clientArgs returns ssh's arguments up to and including host: batch mode
// (never a password prompt), the connect timeout, no pseudo-terminal, no X11,
// keep-alives (a silent host is noticed within 90 s), then port, identity,
// ExtraArgs, and "--" so that host can never be read as an option.
func (c SSHConfig) clientArgs(host string) []string {
	args := []string{
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout=" + strconv.Itoa(ceilSeconds(c.ConnectTimeout)),
		"-o", "ServerAliveInterval=30",
		"-o", "ServerAliveCountMax=3",
		"-T", "-x",
	}
	if c.Port != 0 {
		args = append(args, "-p", strconv.Itoa(c.Port))
	}
	if c.IdentityFile != "" {
		args = append(args, "-i", c.IdentityFile)
	}
	args = append(args, c.ExtraArgs...)
	return append(args, "--", host)
}

// ceilSeconds returns d in whole seconds, rounded up, at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// sshSpawner starts ranks on remote hosts through the ssh client.
type sshSpawner struct {
	cfg     SSHConfig
	environ func() []string // gorun's environment: os.Environ
}

// NewSSHSpawner returns a Spawner that starts each rank on its host with
// the OpenSSH client, as
//
//	ssh -o BatchMode=yes -o ConnectTimeout=N -o ServerAliveInterval=30
//	    -o ServerAliveCountMax=3 -T -x [-p PORT] [-i KEY] [EXTRA...] -- HOST
//	    "exec /bin/sh -c '<wrapper>' gorovod-rank GRACE DIR ARGV..."
//
// (one remote command string, every word shell-quoted; the remote login
// shell must be a POSIX shell: sh, bash, dash, ksh or zsh). The rank's
// environment is not on it: see below.
//
// Environment. The rank gets gorun's environment minus the variables that
// describe gorun's own machine or session: HOME, USER, LOGNAME, SHELL,
// HOSTNAME, HOST, PWD, OLDPWD, SHLVL, _, MAIL, TMPDIR, TERM, TERMCAP,
// COLORTERM, DISPLAY, XAUTHORITY, WINDOWID, LS_COLORS, DBUS_SESSION_BUS_ADDRESS,
// SESSION_MANAGER, KRB5CCNAME, TMUX, TMUX_PANE, STY, CUDA_VISIBLE_DEVICES and
// every SSH_*, XDG_*, SUDO_*, TERM_* and BASH_FUNC_* variable (the remote
// login sets its own HOME, USER and so on; GPU visibility is per machine).
// PATH, LD_LIBRARY_PATH, LANG and the rest are forwarded, so the program is
// found as it is locally. On top come SSHConfig.ForwardEnv (which may name a
// denied variable) and Command.Env, the GOROVOD_* contract, which wins.
// Variables of gorun's whose names a shell cannot export are skipped; such a
// name in ForwardEnv or Command.Env makes Spawn fail, and so does a value
// with a NUL byte or a NAME=value longer than 128 KiB (Linux's limit).
//
// No variable, the secret included, ever appears on a command line, where
// every user of either machine could read it (ps, /proc/PID/cmdline): the
// spawner writes the whole environment to ssh's standard input, and the
// wrapper reads it with the shell's read builtin, before anything else,
// and exports it in the subshell that then execs the program. The stream
// is
//
//	gorovod-env N\n        N, decimal: the number of variables
//	NAME K\n               per variable: its name and the number K of
//	LINE_0\n ... LINE_K\n  newlines in its value, then the value cut at
//	                       its newlines into K+1 lines
//
// followed by the signal lines (see Liveness). Values travel byte for byte
// (spaces, quotes, $, backquotes, newlines, any encoding; empty ones too),
// and none is ever evaluated by a shell.
// GOROVOD_SECRET comes only from Command.Env: the wrapper unsets any the
// remote login has.
//
// Directory. The wrapper changes to Command.Dir (gorun's directory); where
// that directory does not exist it warns on the rank's stderr and runs in
// the remote home directory, as Open MPI and Horovod do.
//
// Processors. With Command.CPUs the program starts through a prelude that
// applies the rank's share of the remote host's processors there (thread
// defaults, and binding with taskset; see CPUShare).
//
// Liveness. The program runs with standard input from /dev/null, while the
// wrapper watches ssh's standard input, which the Process keeps open for the
// rank's lifetime. At EOF (gorun closed it to stop the rank, or gorun or the
// ssh client died, or the connection broke) the wrapper sends SIGTERM to the
// rank's process group and SIGKILL GracePeriod later. The ssh client gets
// SIGKILL when gorun dies (Linux's parent-death signal), so even a SIGKILLed
// gorun leaves no remote rank behind for more than GracePeriod. Process.Signal
// closes ssh's standard input for SIGTERM, forwards SIGHUP, SIGINT, SIGQUIT,
// SIGUSR1 and SIGUSR2 as a line on it, and Kill (or SIGKILL) kills the local
// ssh client. The process group is the ssh session's (OpenSSH's sshd makes
// each session one).
//
// Exit status. ssh returns the program's exit status, which Wait reports as
// an *ExitError; a rank killed by a signal that Signal or Kill sent reports
// that signal (SIGKILL when the wrapper's SIGKILL ended it), other signals
// show as status 128+n, the shell's convention. Status 255 is
// ssh's own failure (it could not connect or lost the connection): Wait
// returns an *SSHError carrying ssh's last lines of standard error. The
// wrapper's own failures exit with 125.
//
// The context given to Spawn bounds the start only; stop a rank with
// Signal or Kill.
func NewSSHSpawner(cfg SSHConfig) Spawner {
	return &sshSpawner{cfg: cfg.withDefaults(), environ: os.Environ}
}

// CheckHosts checks that every host answers over ssh; see the function
// CheckHosts. It makes the spawner a HostChecker.
func (sp *sshSpawner) CheckHosts(ctx context.Context, hosts []string) error {
	return CheckHosts(ctx, sp.cfg, hosts)
}

// Spawn starts c on s.Host; see NewSSHSpawner.
func (sp *sshSpawner) Spawn(ctx context.Context, s Slot, c Command, stdout, stderr io.Writer) (Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runner: rank %d: %w", s.Rank, err)
	}
	argv, env, err := sp.command(s.Host, c)
	if err != nil {
		return nil, fmt.Errorf("runner: rank %d on %s: %w", s.Rank, s.Host, err)
	}
	p := newSSHProcess(s, stdout, stderr)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = p.stdout, io.MultiWriter(p.stderr, p.tail)
	cmd.WaitDelay = sshWaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("runner: rank %d on %s: %w", s.Rank, s.Host, err)
	}
	if err := startLocked(cmd); err != nil {
		return nil, fmt.Errorf("runner: rank %d on %s: start %s: %w", s.Rank, s.Host, strconv.Quote(argv[0]), err)
	}
	p.cmd, p.stdin = cmd, stdin
	// A usual environment fits in the pipe and this returns at once; a
	// larger one waits for ssh to connect and pass it on. An error means
	// ssh is already gone, which Wait reports; ctx ending first kills ssh.
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	_, _ = stdin.Write(env)
	if !stop() {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("runner: rank %d on %s: sending its environment: %w", s.Rank, s.Host, context.Cause(ctx))
	}
	return p, nil
}

// command returns the ssh argv that runs c on host, and what goes to ssh's
// standard input before any signal: the rank's environment, secret
// included (sshEnvStream).
func (sp *sshSpawner) command(host string, c Command) (argv []string, stdin []byte, err error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, nil, fmt.Errorf("empty command")
	}
	env, err := sshEnviron(sp.environ(), sp.cfg.ForwardEnv, c.Env)
	if err != nil {
		return nil, nil, err
	}
	if stdin, err = sshEnvStream(env); err != nil {
		return nil, nil, err
	}
	remote, err := sshRemoteCommand(ceilSeconds(sp.cfg.GracePeriod), c.Dir, withCPUPrelude(c.CPUs, c.Argv))
	if err != nil {
		return nil, nil, err
	}
	argv = append([]string{sp.cfg.SSHPath}, sp.cfg.clientArgs(host)...)
	return append(argv, remote), stdin, nil
}
