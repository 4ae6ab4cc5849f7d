package testslurm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
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
	pidNS   nsID          // the wrapped daemon's PID namespace, known once stopped
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
	if err := startLocked(cmd); err != nil {
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

// startLocked starts cmd on a locked thread: the parent-death signal
// follows the thread that forked the child.
func startLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
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
		if ns, err := nsOf(pid, "pid_for_children"); err == nil && ns != selfNS("pid") {
			d.pidNS = ns
		}
		// Killing the namespace's init kills all in it; unshare, its
		// parent, then exits. Killing unshare instead would leave the
		// init to the machine's init to reap.
		if init := childOf(pid); init > 0 {
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

// childOf returns a child of process pid, or 0.
func childOf(pid int) int {
	want := fmt.Sprint(pid)
	for _, p := range pids() {
		if f := procStat(p); len(f) > 1 && f[1] == want {
			return p
		}
	}
	return 0
}

// nsID identifies a namespace: the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

// valid reports whether id names a namespace.
func (id nsID) valid() bool { return id.ino != 0 }

// nsOf returns the namespace of kind (net, pid, pid_for_children, ...) of
// process pid.
func nsOf(pid int, kind string) (nsID, error) {
	return nsOfFile(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
}

// nsOfFile returns the namespace that path, an nsfs file such as
// /proc/PID/ns/net or /run/netns/NAME, stands for.
func nsOfFile(path string) (nsID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nsID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nsID{}, fmt.Errorf("testslurm: no inode for %s", path)
	}
	return nsID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// selfNS returns the current process's namespace of kind.
func selfNS(kind string) nsID {
	id, _ := nsOf(os.Getpid(), kind)
	return id
}

// killIn kills every process in one of the network or PID namespaces of
// set, until none is left or stopTimeout passes, and returns those left
// ("pid (command)"). The current process's own namespaces are never in the
// set.
func killIn(set []nsID) []string {
	want := map[nsID]bool{}
	for _, id := range set {
		if id.valid() && id != selfNS("net") && id != selfNS("pid") {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	deadline := time.Now().Add(stopTimeout)
	self := os.Getpid()
	for {
		var found []string
		for _, pid := range pids() {
			if pid == self {
				continue
			}
			for _, kind := range []string{"net", "pid"} {
				if id, err := nsOf(pid, kind); err == nil && want[id] {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
					found = append(found, fmt.Sprintf("%d (%s)", pid, trimNL(comm)))
					break
				}
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// trimNL returns b as a string without a trailing newline.
func trimNL(b []byte) string {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return string(b)
}
