package testlab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SSHArgs returns the ssh client options that reach every host as root:
// the lab's key (-i), its known_hosts file with strict host key checking,
// batch mode, and no other configuration (-F /dev/null), so that neither
// the machine's nor the user's ssh configuration matters. Put them before
// the destination: ssh SSHArgs... root@ADDR command.
func (l *Lab) SSHArgs() []string {
	return append([]string{"-i", l.IdentityFile}, l.SSHExtraArgs()...)
}

// SSHExtraArgs returns SSHArgs without the key (-i): what goes into
// runner.SSHConfig.ExtraArgs beside IdentityFile.
func (l *Lab) SSHExtraArgs() []string {
	args := []string{"-F", "/dev/null"}
	for _, o := range l.clientOptions() {
		if o[0] != "IdentityFile" {
			args = append(args, "-o", o[0]+"="+o[1])
		}
	}
	if l.SSHPort != 0 && l.SSHPort != 22 {
		args = append(args, "-p", strconv.Itoa(l.SSHPort))
	}
	return args
}

// SSHCommand returns an ssh command line that reaches every host as root,
// as one string for programs that take their ssh as a command (mpirun's
// plm_rsh_agent, rsync -e): the lab's ssh wrapper, that is the system's
// ssh with -F SSHConfigFile.
func (l *Lab) SSHCommand() string { return filepath.Join(l.BinDir, "ssh") }

// HostsFlag returns the hosts with slots each, in gorun's and mpirun's -H
// form: ADDR1:slots,ADDR2:slots,...
func (l *Lab) HostsFlag(slots int) string {
	var hosts []string
	for _, h := range l.Hosts {
		hosts = append(hosts, h.Addr+":"+strconv.Itoa(slots))
	}
	return strings.Join(hosts, ",")
}

// GorunArgs returns gorun's flags for the lab, to go with -np and -H
// (HostsFlag) and GorunEnv: the rendezvous on the bridge's address and the
// lab's ssh key.
func (l *Lab) GorunArgs() []string {
	args := []string{"--bind-addr", l.BridgeAddr, "--ssh-identity-file", l.IdentityFile}
	if l.SSHPort != 0 && l.SSHPort != 22 {
		args = append(args, "--ssh-port", strconv.Itoa(l.SSHPort))
	}
	return args
}

// GorunEnv returns the environment entries to add to gorun's: PATH with
// BinDir first, so that gorun's ssh is the lab's wrapper, which knows the
// hosts' keys (gorun has no flag for a known_hosts file).
func (l *Lab) GorunEnv() []string {
	return []string{"PATH=" + l.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// Command returns a command that runs name with args in the network
// namespace of Hosts[host] (through nsenter), in the caller's current
// directory, with the caller's environment: unlike an ssh session it
// shares the machine's host name, /etc/hosts and /dev/shm. The process is
// the leader of a process group of its own; when ctx is done or the lab is
// closed, the whole group is killed, and Wait stops waiting for output
// 10 s later. It is also killed when the thread that started it exits (a
// parent-death signal), as when the test process dies. Callers may change
// Env, Dir, the standard streams, Cancel and WaitDelay before starting it.
// A host out of range makes a command whose Start fails.
func (l *Lab) Command(ctx context.Context, host int, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithCancel(ctx)
	closed := l.ctx // nil for a Lab this process did not make
	if closed == nil {
		closed = context.Background()
	}
	context.AfterFunc(closed, cancel)
	netns := ""
	if host >= 0 && host < len(l.Hosts) {
		netns = l.Hosts[host].NetNS
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + filepath.Join("/run/netns", netns), "--", name}, args...)...)
	if netns == "" {
		cmd.Err = fmt.Errorf("testlab: no host %d in a lab of %d", host, len(l.Hosts))
		cancel()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}
