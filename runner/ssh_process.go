package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// sshStatusFailed is the exit status of an ssh client that failed itself.
const sshStatusFailed = 255

// sshProcess is a rank started by the ssh spawner: the local ssh client,
// whose standard input the remote wrapper watches.
type sshProcess struct {
	slot           Slot
	cmd            *exec.Cmd
	stdin          io.WriteCloser // ssh's standard input; closing it stops the rank
	stdout, stderr *lineWriter
	tail           *sshTail // ssh's last lines of stderr, for status 255

	waitOnce sync.Once
	waitErr  error

	mu   sync.Mutex
	done bool             // Wait has seen ssh exit
	sent []syscall.Signal // signals Signal and Kill delivered or asked for
}

func newSSHProcess(s Slot, stdout, stderr io.Writer) *sshProcess {
	return &sshProcess{
		slot:   s,
		stdout: newLineWriter(func(line []byte) { _, _ = stdout.Write(line) }),
		stderr: newLineWriter(func(line []byte) { _, _ = stderr.Write(line) }),
		tail:   &sshTail{},
	}
}

// Wait waits for the ssh client to exit and flushes an unfinished last line
// of output. It may be called more than once.
func (p *sshProcess) Wait() error {
	p.waitOnce.Do(func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.done = true
		p.mu.Unlock()
		p.stdout.Flush()
		p.stderr.Flush()
		p.waitErr = p.exitError(err)
	})
	return p.waitErr
}

// exitError turns the error of exec.Cmd.Wait into an *ExitError, or an
// *SSHError for ssh's own failure.
func (p *sshProcess) exitError(err error) error {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return nil
	case !errors.As(err, &ee):
		return fmt.Errorf("runner: rank %d on %s: ssh: %w", p.slot.Rank, p.slot.Host, err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return p.signaled(ws.Signal())
	}
	status := ee.ExitCode()
	if sig, ok := p.stoppedBy(status); ok {
		return p.signaled(sig)
	}
	xe := &ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: status}
	if status == sshStatusFailed {
		return &SSHError{Host: p.slot.Host, Rank: p.slot.Rank, Stderr: p.tail.String(), Err: xe}
	}
	return xe
}

// signaled reports the rank as killed by sig.
func (p *sshProcess) signaled(sig syscall.Signal) *ExitError {
	return &ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: -1, Signal: signalName(sig)}
}

// stoppedBy reports which signal that this Process sent explains the
// remote status: 128+n for a signal n that the program died of; after a stop
// (SIGTERM or SIGKILL), 128+9 or 255 is the wrapper's SIGKILL (which ends
// the ssh session without a status, so ssh reports 255).
func (p *sshProcess) stoppedBy(status int) (syscall.Signal, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stopped := false
	for _, sig := range p.sent {
		if status == 128+int(sig) {
			return sig, true
		}
		stopped = stopped || sig == syscall.SIGTERM || sig == syscall.SIGKILL
	}
	if stopped && (status == sshStatusFailed || status == 128+int(syscall.SIGKILL)) {
		return syscall.SIGKILL, true
	}
	return 0, false
}

// Signal stops the rank gracefully for SIGTERM (it closes ssh's standard
// input: the remote wrapper sends SIGTERM, then SIGKILL after the grace
// period), kills it for SIGKILL (see Kill), and forwards SIGHUP, SIGINT,
// SIGQUIT, SIGUSR1 and SIGUSR2 to the rank's process group. Other signals
// cannot be forwarded and are an error.
func (p *sshProcess) Signal(sig os.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	s, _ := sig.(syscall.Signal)
	name, ok := sshSignalName(s)
	if !ok {
		return fmt.Errorf("runner: rank %d on %s: signal %v cannot be forwarded over ssh", p.slot.Rank, p.slot.Host, sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return os.ErrProcessDone
	}
	p.sent = append(p.sent, s)
	if s == syscall.SIGTERM {
		_ = p.stdin.Close() // a second close is a no-op
		return nil
	}
	if _, err := io.WriteString(p.stdin, name+"\n"); err != nil {
		return fmt.Errorf("runner: rank %d on %s: forward %s: the rank is already stopping: %w", p.slot.Rank, p.slot.Host, name, err)
	}
	return nil
}

// sshSignalName returns the name of a signal that Signal can forward, as
// the wrapper's kill -s takes it.
func sshSignalName(sig syscall.Signal) (string, bool) {
	switch sig {
	case syscall.SIGHUP:
		return "HUP", true
	case syscall.SIGINT:
		return "INT", true
	case syscall.SIGQUIT:
		return "QUIT", true
	case syscall.SIGTERM:
		return "TERM", true
	case syscall.SIGUSR1:
		return "USR1", true
	case syscall.SIGUSR2:
		return "USR2", true
	}
	return "", false
}

// Kill kills the local ssh client at once; the remote wrapper sees its
// standard input end and stops the rank (SIGTERM, then SIGKILL after the
// grace period).
func (p *sshProcess) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return os.ErrProcessDone
	}
	p.sent = append(p.sent, syscall.SIGKILL)
	// ssh first: closing its standard input first lets the remote side stop
	// the rank with SIGTERM, and ssh exit with that status, before the
	// SIGKILL lands.
	err := p.cmd.Process.Kill()
	_ = p.stdin.Close()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("runner: kill rank %d: %w", p.slot.Rank, err)
	}
	return nil
}

// sshTailLines and sshTailBytes bound what an SSHError repeats of ssh's
// standard error.
const (
	sshTailLines = 5
	sshTailBytes = 2 << 10
)

// sshTail keeps the end of a stream: the last sshTailLines lines, at most
// sshTailBytes. Safe for concurrent use.
type sshTail struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of what it was given; it never fails.
func (t *sshTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*sshTailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-sshTailBytes:]...)
	}
	return len(p), nil
}

// String returns the kept lines, trimmed.
func (t *sshTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimSpace(t.buf)
	if len(b) > sshTailBytes {
		b = b[len(b)-sshTailBytes:]
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > sshTailLines {
		lines = lines[len(lines)-sshTailLines:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
