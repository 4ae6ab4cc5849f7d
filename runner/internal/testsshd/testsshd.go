package testsshd

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/testenv"
	"github.com/gorovod/gorovod/internal/testutil"
)

// Host is the loopback address the server listens on: not 127.0.0.1, so
// that the launcher sees a host that is not local.
const Host = "127.0.0.2"

// SSHDPath is where Debian and Ubuntu install sshd; sshd must be run by an
// absolute path.
const SSHDPath = "/usr/sbin/sshd"

// startTimeout bounds how long sshd has to start answering.
const startTimeout = 10 * time.Second

// Server is a running sshd, stopped when the test ends.
type Server struct {
	Host         string // address to ssh to: 127.0.0.2
	Port         int    // its port
	Dir          string // temporary directory with keys, config and logs
	IdentityFile string // the client's private key
	KnownHosts   string // a known_hosts file trusting the server's host key

	cmd    *exec.Cmd
	exited chan error // receives sshd's exit
	log    *testutil.SyncBuffer
}

// Start starts sshd for the current user and stops it at the end of the
// test. It skips t when sshd is not installed (fails when the CI switch
// testenv.RequireSSHD is on), and fails t when sshd does not start; its log
// is printed when t fails.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		msg := fmt.Sprintf("testsshd: %s not found (apt-get install openssh-server): %v", SSHDPath, err)
		if testenv.Required(testenv.RequireSSHD) {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &Server{Host: Host, Dir: t.TempDir(), log: &testutil.SyncBuffer{}}
	s.IdentityFile = filepath.Join(s.Dir, "id_ed25519")
	s.KnownHosts = filepath.Join(s.Dir, "known_hosts")
	if err := s.setup(); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 3 { // a free port can be taken between choosing and binding it
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("%v\nsshd log:\n%s", err, s.log.String())
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.log.String())
		}
	})
	return s
}

// ExtraArgs returns the ssh client options, other than port (-p) and
// identity (-i), that reach this server whatever the user's ssh setup:
// no user config, only this server's known_hosts, only the given key.
func (s *Server) ExtraArgs() []string {
	return []string{
		"-F", "/dev/null",
		"-o", "UserKnownHostsFile=" + s.KnownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "ControlMaster=no",
		"-o", "LogLevel=ERROR",
	}
}

// SSHArgs returns the whole ssh command line up to the host name, for
// running ssh by hand in a test.
func (s *Server) SSHArgs() []string {
	args := []string{"ssh", "-p", strconv.Itoa(s.Port), "-i", s.IdentityFile, "-o", "BatchMode=yes"}
	return append(args, s.ExtraArgs()...)
}

// Log returns what sshd has logged so far.
func (s *Server) Log() string { return s.log.String() }

// setup makes the keys, authorized_keys and, for root, the privilege
// separation directory that sshd insists on.
func (s *Server) setup() error {
	hostKey := filepath.Join(s.Dir, "host_ed25519")
	for _, key := range []string{hostKey, s.IdentityFile} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "testsshd", "-f", key).CombinedOutput()
		if err != nil {
			return fmt.Errorf("testsshd: ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(s.IdentityFile + ".pub")
	if err != nil {
		return fmt.Errorf("testsshd: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "authorized_keys"), pub, 0o600); err != nil {
		return fmt.Errorf("testsshd: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return fmt.Errorf("testsshd: sshd's privilege separation directory: %w", err)
		}
	}
	return nil
}

// start chooses a free port, writes the config and known_hosts for it,
// and runs sshd until it answers.
func (s *Server) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	if err := s.writeConfig(); err != nil {
		return err
	}
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", filepath.Join(s.Dir, "sshd_config"))
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startLocked(cmd); err != nil {
		return fmt.Errorf("testsshd: start sshd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // "sshd-wait": ends with sshd
	if err := waitBanner(s.addr(), exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// startLocked starts cmd on a locked thread: the parent-death signal
// follows the thread that forked the child.
func startLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// stop stops sshd and waits for it; its session processes end with their
// connections.
func (s *Server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *Server) addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// writeConfig writes sshd_config and known_hosts for the current port.
func (s *Server) writeConfig() error {
	hostKey := filepath.Join(s.Dir, "host_ed25519")
	config := strings.Join([]string{
		"ListenAddress " + s.addr(),
		"HostKey " + hostKey,
		"AuthorizedKeysFile " + filepath.Join(s.Dir, "authorized_keys"),
		"PidFile " + filepath.Join(s.Dir, "sshd.pid"),
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password",
		"StrictModes no",
		"UsePAM no",
		"PrintMotd no",
		"PrintLastLog no",
		"X11Forwarding no",
		"MaxStartups 200",
		"MaxSessions 200",
		"LogLevel INFO",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "sshd_config"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("testsshd: %w", err)
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return fmt.Errorf("testsshd: %w", err)
	}
	fields := strings.Fields(string(pub))
	if len(fields) < 2 {
		return fmt.Errorf("testsshd: malformed host key %q", pub)
	}
	line := fmt.Sprintf("[%s]:%d %s %s\n", s.Host, s.Port, fields[0], fields[1])
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		return fmt.Errorf("testsshd: %w", err)
	}
	return nil
}

// freePort returns a TCP port of Host that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
	if err != nil {
		return 0, fmt.Errorf("testsshd: no free port on %s: %w", Host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitBanner waits until the server at addr sends its SSH banner, sshd
// exits, or startTimeout passes.
func waitBanner(addr string, exited <-chan error) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("testsshd: sshd exited at start: %v", err)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			if strings.HasPrefix(line, "SSH-") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testsshd: sshd did not answer on %s within %v", addr, startTimeout)
}
