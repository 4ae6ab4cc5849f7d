package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// ErrDiscovery reports a host discovery script that failed or printed
// something that is not a host list.
var ErrDiscovery = errors.New("runner: host discovery")

// discoveryTimeout bounds one run of the discovery script, from its start
// until it has exited and closed its output, in nanoseconds: 10 s. It is
// a variable for the tests, and atomic because a test that changes it may
// run while the discoverer of another test's job still runs the script.
var discoveryTimeout = func() *atomic.Int64 {
	var d atomic.Int64
	d.Store(int64(10 * time.Second))
	return &d
}()

// maxDiscoveryOutput bounds what one run of the discovery script may print
// on its standard output; it is killed when it prints more.
const maxDiscoveryOutput = 1 << 20

// maxDiscoveryStderr is how much of the script's standard error is kept
// (to quote in an error); the rest is read and dropped.
const maxDiscoveryStderr = 4 << 10

// DiscoverHosts runs the host discovery script (gorun
// --host-discovery-script) and parses what it prints: one host per line,
// "host:slots" or a bare "host" (slotsPerHost slots), blank lines and #
// comments ignored. No hosts at all is a valid answer. A non-zero exit,
// a line that is not a host, or a host listed twice is an error that
// wraps ErrDiscovery and quotes the script's output.
//
// The script runs in a process group of its own. A run that has not
// exited and closed its output within 10 seconds (a child that it left
// behind may hold the output open), or that prints more than 1 MiB, is an
// error: the whole group is killed with SIGKILL and reading stops there.
// After every run, whatever is left of the group is killed too, so that
// nothing the script started outlives it.
func DiscoverHosts(ctx context.Context, script string, slotsPerHost int) ([]Host, error) {
	out, errOut, err := runDiscovery(ctx, script)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v; it printed %q and on stderr %q", ErrDiscovery, script, err,
			clip(out, 200), clip(errOut, 200))
	}
	return parseDiscovered(out, slotsPerHost, script)
}

// runDiscovery runs script in a process group of its own and returns what
// it printed, or why it failed: it exited non-zero, it did not exit and
// close its output within discoveryTimeout, it printed more than maxDiscoveryOutput,
// or ctx ended. The group is killed before runDiscovery returns.
func runDiscovery(ctx context.Context, script string) (stdout, stderr string, err error) {
	bound := time.Duration(discoveryTimeout.Load())
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", "", err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles([]*os.File{outR, outW})
		return "", "", err
	}
	defer closeFiles([]*os.File{outR, errR})
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = outW, errW
	// Its own group, killed as a whole below; and killed with gorun should
	// gorun die before it can (as local ranks are).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	closeFiles([]*os.File{outW, errW}) // the script holds them now
	if err != nil {
		return "", "", err
	}
	group := cmd.Process.Pid
	defer func() { _ = syscall.Kill(-group, syscall.SIGKILL) }()

	var outBuf, errBuf bytes.Buffer
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go func() { // reads at most one byte past the limit
		defer close(outDone)
		_, _ = io.Copy(&outBuf, io.LimitReader(outR, maxDiscoveryOutput+1))
	}()
	go func() {
		defer close(errDone)
		_, _ = io.Copy(&errBuf, io.LimitReader(errR, maxDiscoveryStderr))
		_, _ = io.Copy(io.Discard, errR)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timer := time.NewTimer(bound)
	defer timer.Stop()
	var waitErr, failure error
	outOpen, errOpen, running := outDone, errDone, exited
	for failure == nil && (outOpen != nil || errOpen != nil || running != nil) {
		select {
		case <-outOpen:
			outOpen = nil
			if outBuf.Len() > maxDiscoveryOutput {
				failure = fmt.Errorf("it printed more than %d bytes (1 MiB), the limit of its output; killed", maxDiscoveryOutput)
			}
		case <-errOpen:
			errOpen = nil
		case waitErr = <-running:
			running = nil
		case <-timer.C:
			state := "it was still running"
			if running == nil {
				state = "it had exited, but a process it started held its output open"
			}
			failure = fmt.Errorf("timed out: it did not finish within %v, the bound of one run (%s); killed with its process group", bound, state)
		case <-ctx.Done():
			failure = context.Cause(ctx)
		}
	}
	if failure != nil {
		_ = syscall.Kill(-group, syscall.SIGKILL)
		closeFiles([]*os.File{outR, errR}) // stops the readers, whoever else holds the pipes
		<-outDone
		<-errDone
		if running != nil {
			<-running // the script was killed with its group
		}
		return outBuf.String(), errBuf.String(), failure // DiscoverHosts quotes the start of each
	}
	return outBuf.String(), errBuf.String(), waitErr
}

// discoveryWarnEvery is how often a discovery script that keeps failing
// mid-run is reported after its first failure.
const discoveryWarnEvery = 30 * time.Second

// discoveryFailures rate-limits the reports of a discovery script that
// fails mid-run: the first failure is logged, then a summary at most every
// discoveryWarnEvery while it keeps failing, and once when it works again.
type discoveryFailures struct {
	count    int       // failures in a row
	first    time.Time // the first of them
	reported time.Time // when the last report was logged
}

// failed takes in a failed run at now.
func (f *discoveryFailures) failed(log *slog.Logger, err error, now time.Time) {
	f.count++
	if f.count == 1 {
		f.first, f.reported = now, now
		log.Warn("gorun: host discovery failed; keeping the hosts found before", "err", err,
			"next_report_within", discoveryWarnEvery)
		return
	}
	if now.Sub(f.reported) >= discoveryWarnEvery {
		f.reported = now
		log.Warn("gorun: host discovery still fails; keeping the hosts found before", "failures", f.count,
			"for", now.Sub(f.first).Round(time.Second), "err", err)
	}
}

// worked takes in a successful run at now. The note that the script works
// again is a warning as well: it closes the problem that the warnings
// before it reported, saying how long it lasted.
func (f *discoveryFailures) worked(log *slog.Logger, now time.Time) {
	if f.count == 0 {
		return
	}
	log.Warn("gorun: host discovery works again", "failures", f.count, "for", now.Sub(f.first).Round(time.Second))
	*f = discoveryFailures{}
}

// parseDiscovered parses a discovery script's output (see DiscoverHosts).
func parseDiscovered(out string, slotsPerHost int, script string) ([]Host, error) {
	var hosts []Host
	seen := map[string]int{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		h, err := hostlist.ParseItem(line)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, line %d %q: %v", ErrDiscovery, script, i+1, clip(line, maxQuoted), err)
		}
		if !hasSlotCount(line) {
			h.Slots = max(slotsPerHost, 1)
		}
		if j, dup := seen[hostlist.Key(h.Name)]; dup {
			return nil, fmt.Errorf("%w: %s, line %d: host %q is also on line %d", ErrDiscovery, script, i+1, h.Name, j)
		}
		seen[hostlist.Key(h.Name)] = i + 1
		hosts = append(hosts, Host(h))
	}
	return hosts, nil
}

// hasSlotCount reports whether a host item names its slots ("h:2",
// "[v6]:2").
func hasSlotCount(item string) bool {
	if strings.HasPrefix(item, "[") {
		return strings.Contains(item, "]:")
	}
	return strings.Contains(item, ":")
}
