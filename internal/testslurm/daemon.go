package testslurm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/internal/testnet"
)

// wrapScript runs a daemon in the namespaces unshare made: it bind-mounts
// the hosts file ($1) and nsswitch.conf ($2), sets the host name ($3, when
// not empty) and runs the daemon (the rest) as its child, staying as the
// PID namespace's init, which reaps the processes orphaned in it
// (slurmstepd is one).
const wrapScript = `mount --bind "$1" /etc/hosts || exit 125
[ ! -e /etc/nsswitch.conf ] || mount --bind "$2" /etc/nsswitch.conf || exit 125
[ -z "$3" ] || hostname "$3" || exit 125
shift 3
"$@" &
wait $!`

// daemon is a daemon process that the cluster started and waits for.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	wrapped bool          // run by unshare in PID, mount and UTS namespaces of its own
	done    chan struct{} // closed when the process has been waited for
	err     error         // Wait's error, set before done is closed
	pidNS   testnet.NSID  // the wrapped daemon's PID namespace, known once stopped
}

// startDaemon starts argv as the daemon name, logging to name.out in the
// log directory. A wrapped daemon runs in new PID, mount and UTS
// namespaces, sees the hosts file and NSSwitch in /etc, has the host name
// hostname (unless empty) and, when netns is not empty, runs in that
// network namespace; killing the init of its PID namespace ends it and
// every process it started.
func (c *Cluster) startDaemon(name string, wrapped bool, hostname, netns string, argv ...string) (*daemon, error) {
	if wrapped {
		if netns != "" {
			argv = append([]string{"nsenter", "--net=" + filepath.Join("/run/netns", netns)}, argv...)
		}
		argv = append([]string{"unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc",
			"--propagation", "slave", "sh", "-c", wrapScript, "sh", c.HostsFile, c.NSSwitch, hostname}, argv...)
	}
	logFile, err := os.OpenFile(filepath.Join(c.logDir, name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testslurm: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = c.Env()
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile // files: Wait need not wait for pipes
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := testnet.StartLocked(cmd); err != nil {
		return nil, fmt.Errorf("testslurm: start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, wrapped: wrapped, done: make(chan struct{})}
	go func() { // ends with the daemon
		d.err = cmd.Wait()
		close(d.done)
	}()
	c.daemons = append(c.daemons, d)
	return d, nil
}

// exited reports whether the daemon has exited.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop kills the daemon, and for a wrapped one everything in its PID
// namespace, and waits for it. An unwrapped daemon (munged) gets SIGTERM
// first.
func (d *daemon) stop() {
	if d.exited() {
		return
	}
	pid := d.cmd.Process.Pid
	if d.wrapped {
		if ns, err := testnet.NSOf(pid, "pid_for_children"); err == nil && ns != testnet.SelfNS("pid") {
			d.pidNS = ns
		}
		// Killing the namespace's init kills all in it; unshare, its
		// parent, then exits. Killing unshare instead would leave the
		// init to the machine's init to reap.
		if init := testnet.ChildOf(pid); init > 0 {
			_ = syscall.Kill(init, syscall.SIGKILL)
		} else {
			_ = d.cmd.Process.Kill()
		}
	} else {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-d.done:
		return
	case <-time.After(stopTimeout):
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}
