package testlab

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/internal/shellquote"
	"github.com/gorovod/gorovod/internal/testnet"
)

// sshdPath is where Debian installs sshd, which must be run by an absolute
// path.
const sshdPath = "/usr/sbin/sshd"

// sshdStartTimeout bounds the wait for a host's sshd to answer (generous:
// a loaded machine starts many at once).
const sshdStartTimeout = 60 * time.Second

// sshdStopTimeout is how long an sshd has between SIGTERM and SIGKILL.
const sshdStopTimeout = 5 * time.Second

// hostScript runs a host's sshd in the private mount and UTS namespaces
// unshare made: the lab's hosts file ($1) and nsswitch.conf ($2) over
// those of /etc, an empty tmpfs over /dev/shm, the host name $3, then
// exec of the rest.
const hostScript = `mount --bind "$1" /etc/hosts || exit 125
[ ! -e /etc/nsswitch.conf ] || mount --bind "$2" /etc/nsswitch.conf || exit 125
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm || exit 125
hostname "$3" || exit 125
shift 3
exec "$@"`

// sshd is a host's sshd that this process started and waits for.
type sshd struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once waited for
}

// clientOptions are the ssh client options (-o NAME=VALUE, or lines of an
// ssh_config) that reach every host as root with the lab's key and known
// hosts only, whatever the machine's and the user's ssh configuration.
func (l *Lab) clientOptions() [][2]string {
	return [][2]string{
		{"User", "root"},
		{"IdentityFile", l.IdentityFile},
		{"IdentitiesOnly", "yes"},
		{"UserKnownHostsFile", l.KnownHosts},
		{"GlobalKnownHostsFile", "/dev/null"},
		{"StrictHostKeyChecking", "yes"},
		{"BatchMode", "yes"},
		{"ControlMaster", "no"},
		{"LogLevel", "ERROR"},
	}
}

// hostDir returns the directory of host h's sshd: its host key,
// configuration and log.
func (l *Lab) hostDir(h Host) string { return filepath.Join(l.Dir, h.Name) }

// sshdLog returns the log file of host h's sshd.
func (l *Lab) sshdLog(h Host) string { return filepath.Join(l.hostDir(h), "sshd.log") }

// writeSSHFiles makes the keys and writes the files that the sshds and the
// clients read: authorized_keys, every host's sshd_config, known_hosts,
// ssh_config, the ssh wrapper in BinDir, the hosts file and nsswitch.conf.
func (l *Lab) writeSSHFiles() error {
	l.IdentityFile = filepath.Join(l.Dir, "id_ed25519")
	l.KnownHosts = filepath.Join(l.Dir, "known_hosts")
	l.SSHConfigFile = filepath.Join(l.Dir, "ssh_config")
	l.BinDir = filepath.Join(l.Dir, "bin")
	pub, err := keygen(l.IdentityFile, "testlab-"+l.ID)
	if err != nil {
		return err
	}
	files := map[string]string{
		"authorized_keys": pub + "\n",
		"hosts":           l.net.HostsFile("launcher"),
		"nsswitch.conf":   testnet.NSSwitch(),
	}
	var known strings.Builder
	for _, h := range l.Hosts {
		key := filepath.Join(l.hostDir(h), "ssh_host_ed25519_key")
		if err := os.Mkdir(l.hostDir(h), 0o755); err != nil {
			return fmt.Errorf("testlab: %w", err)
		}
		hostPub, err := keygen(key, h.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&known, "%s,%s %s\n", h.Addr, h.Name, hostPub)
		files[filepath.Join(h.Name, "sshd_config")] = l.sshdConfig(h, key)
	}
	files["known_hosts"] = known.String()
	var config strings.Builder
	fmt.Fprintf(&config, "# testlab %s: every host as root, with the lab's key and known hosts only\nHost *\n", l.ID)
	for _, o := range l.clientOptions() {
		fmt.Fprintf(&config, "  %s %s\n", o[0], o[1])
	}
	files["ssh_config"] = config.String()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(l.Dir, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("testlab: %w", err)
		}
	}
	return l.writeSSHWrapper()
}

// writeSSHWrapper writes BinDir/ssh, which runs the system's ssh client
// (found now, by its absolute path: the wrapper is first in PATH) with the
// lab's ssh_config.
func (l *Lab) writeSSHWrapper() error {
	client, err := exec.LookPath("ssh")
	if err == nil {
		client, err = filepath.Abs(client)
	}
	if err != nil {
		return fmt.Errorf("testlab: ssh client: %w", err)
	}
	if err := os.Mkdir(l.BinDir, 0o755); err != nil {
		return fmt.Errorf("testlab: %w", err)
	}
	script := fmt.Sprintf("#!/bin/sh\n# testlab %s: ssh with the lab's configuration\nexec %s -F %s \"$@\"\n",
		l.ID, shellquote.Quote(client), shellquote.Quote(l.SSHConfigFile))
	if err := os.WriteFile(filepath.Join(l.BinDir, "ssh"), []byte(script), 0o755); err != nil {
		return fmt.Errorf("testlab: %w", err)
	}
	return nil
}

// sshdConfig returns host h's sshd_config: port 22 of its namespace, root
// by key only, with host key hostKey.
func (l *Lab) sshdConfig(h Host, hostKey string) string {
	settings := [][2]string{
		{"ListenAddress", "0.0.0.0:" + strconv.Itoa(SSHPort)},
		{"HostKey", hostKey},
		{"AuthorizedKeysFile", filepath.Join(l.Dir, "authorized_keys")},
		{"PidFile", filepath.Join(l.hostDir(h), "sshd.pid")},
		{"PermitRootLogin", "prohibit-password"},
		{"PubkeyAuthentication", "yes"},
		{"PasswordAuthentication", "no"},
		{"KbdInteractiveAuthentication", "no"},
		{"UsePAM", "no"},
		{"StrictModes", "no"},   // the lab's directory is in /tmp
		{"UseDNS", "no"},        // no DNS in the namespaces
		{"MaxStartups", "1000"}, // gorun and mpirun open a session per rank at once
		{"MaxSessions", "1000"},
		{"PrintMotd", "no"},
		{"PrintLastLog", "no"},
		{"X11Forwarding", "no"},
		{"LogLevel", "INFO"},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# testlab %s: %s (%s)\n", l.ID, h.Name, h.Addr)
	for _, s := range settings {
		fmt.Fprintf(&b, "%s %s\n", s[0], s[1])
	}
	return b.String()
}

// keygen makes an ed25519 key pair without a passphrase at path and
// returns its public key as "TYPE BASE64", without the comment.
func keygen(path, comment string) (string, error) {
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("testlab: ssh-keygen: %v: %s", err, out)
	}
	data, err := os.ReadFile(path + ".pub")
	if err != nil {
		return "", fmt.Errorf("testlab: %w", err)
	}
	if typ, rest, ok := strings.Cut(strings.TrimSpace(string(data)), " "); ok {
		key, _, _ := strings.Cut(rest, " ")
		return typ + " " + key, nil
	}
	return "", fmt.Errorf("testlab: %s.pub: not a public key: %q", path, data)
}

// startSSHDs starts every host's sshd and waits until each answers.
func (l *Lab) startSSHDs() error {
	// sshd insists on its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return fmt.Errorf("testlab: %w", err)
	}
	for _, h := range l.Hosts {
		if err := l.startSSHD(h); err != nil {
			return err
		}
	}
	for i, h := range l.Hosts {
		if err := l.waitSSHD(h, l.sshds[i]); err != nil {
			return err
		}
	}
	return nil
}

// startSSHD starts host h's sshd in its namespaces, logging to its log
// file. It dies with this process unless the lab is detached, in which
// case it runs in a session of its own.
func (l *Lab) startSSHD(h Host) error {
	logFile, err := os.OpenFile(l.sshdLog(h), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testlab: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command("nsenter", "--net="+filepath.Join("/run/netns", h.NetNS), "--",
		"unshare", "--mount", "--uts", "--propagation", "slave", "--",
		"sh", "-c", hostScript, "sh", filepath.Join(l.Dir, "hosts"), filepath.Join(l.Dir, "nsswitch.conf"), h.Name,
		sshdPath, "-D", "-e", "-f", filepath.Join(l.hostDir(h), "sshd_config"))
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile // files: Wait need not wait for pipes
	if l.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = testnet.StartLocked(cmd)
	}
	if err != nil {
		return fmt.Errorf("testlab: start %s's sshd: %w", h.Name, err)
	}
	d := &sshd{cmd: cmd, done: make(chan struct{})}
	go func() { // ends with sshd
		_ = cmd.Wait()
		close(d.done)
	}()
	l.sshds = append(l.sshds, d)
	return nil
}

// waitSSHD waits until host h's sshd sends its banner to a client in the
// root namespace.
func (l *Lab) waitSSHD(h Host, d *sshd) error {
	addr := net.JoinHostPort(h.Addr, strconv.Itoa(SSHPort))
	deadline := time.Now().Add(sshdStartTimeout)
	for {
		select {
		case <-d.done:
			log, _ := os.ReadFile(l.sshdLog(h))
			return fmt.Errorf("testlab: %s's sshd exited at start (%v):\n%s", h.Name, d.cmd.ProcessState, log)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			if strings.HasPrefix(line, "SSH-") {
				return nil
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(l.sshdLog(h))
			return fmt.Errorf("testlab: %s's sshd did not answer on %s within %v:\n%s", h.Name, addr, sshdStartTimeout, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the sshd: SIGTERM, then SIGKILL after sshdStopTimeout; it
// waits for it. The sessions it started live on (Close kills them).
func (d *sshd) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(sshdStopTimeout):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}
