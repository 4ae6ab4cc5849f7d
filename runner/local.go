package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// localWaitDelay bounds how long Wait keeps reading a rank's output after
// the rank exited, when something it started still holds its pipes.
const localWaitDelay = time.Second

// LocalSpawner starts ranks on this machine with os/exec.
//
// Each rank runs in its own process group, so Signal and Kill reach every
// process it started, and the stragglers of a rank that exited are killed
// with its group. The rank gets SIGKILL if gorun dies (Linux's parent-death
// signal), so even a SIGKILLed gorun leaves no rank behind; processes the
// rank itself started survive that case, and an hvd rank notices the lost
// rendezvous instead. Its environment is gorun's plus Command.Env plus the
// thread defaults of Command.CPUs, which also binds it to its processors
// (see CPUShare); its standard input is empty.
type LocalSpawner struct{}

// Spawn starts c for slot s; see Spawner.
func (LocalSpawner) Spawn(ctx context.Context, s Slot, c Command, stdout, stderr io.Writer) (Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runner: rank %d: %w", s.Rank, err)
	}
	if len(c.Argv) == 0 {
		return nil, fmt.Errorf("runner: rank %d: empty command", s.Rank)
	}
	p := &localProcess{
		slot:   s,
		stdout: newLineWriter(func(line []byte) { _, _ = stdout.Write(line) }),
		stderr: newLineWriter(func(line []byte) { _, _ = stderr.Write(line) }),
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.WaitDelay = localWaitDelay
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startShared(cmd, c.CPUs); err != nil {
		return nil, fmt.Errorf("runner: rank %d on %s: start %s: %w", s.Rank, s.Host, strconv.Quote(c.Argv[0]), err)
	}
	p.cmd = cmd
	return p, nil
}

// startLocked starts cmd with the goroutine locked to its thread: Linux
// sends the parent-death signal when the thread that forked the child ends,
// and a thread ends only with a goroutine that exits locked to it.
func startLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// localProcess is a rank started by LocalSpawner.
type localProcess struct {
	slot           Slot
	cmd            *exec.Cmd
	stdout, stderr *lineWriter

	mu     sync.Mutex
	reaped bool // Wait is done: the group id may belong to someone else now
}

// Wait waits for the rank to exit, kills what is left of its process
// group, and flushes an unfinished last line of its output.
func (p *localProcess) Wait() error {
	err := p.cmd.Wait()
	p.mu.Lock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // stragglers; ESRCH when none
	p.reaped = true
	p.mu.Unlock()
	p.stdout.Flush()
	p.stderr.Flush()
	return p.exitError(err)
}

// exitError turns the error of exec.Cmd.Wait into an *ExitError.
func (p *localProcess) exitError(err error) error {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return nil
	case errors.As(err, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if ok && ws.Signaled() {
			return &ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: -1, Signal: signalName(ws.Signal())}
		}
		return &ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: ee.ExitCode()}
	default:
		return fmt.Errorf("runner: rank %d on %s: %w", p.slot.Rank, p.slot.Host, err)
	}
}

// Signal sends sig to the rank's process group.
func (p *localProcess) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.cmd.Process.Signal(sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, s); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("runner: signal rank %d: %w", p.slot.Rank, err)
	}
	return nil
}

// Kill sends SIGKILL to the rank's process group.
func (p *localProcess) Kill() error { return p.Signal(syscall.SIGKILL) }

// signalName names common signals the way shells do ("SIGTERM").
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
	}
	if name, ok := names[s]; ok {
		return name
	}
	return "signal " + strconv.Itoa(int(s))
}
