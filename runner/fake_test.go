package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// fakeSpawner starts fakeProcs instead of processes, and records what it
// was asked to run.
type fakeSpawner struct {
	t        *testing.T
	ignore   map[int]bool  // ranks that ignore SIGTERM
	failAt   map[int]error // ranks whose Spawn fails
	exitNow  map[int]int   // ranks that exit at once with this status
	stdout   map[int]string
	stderr   map[int]string
	onSignal func(p *fakeProc, sig os.Signal)

	mu      sync.Mutex
	procs   map[int]*fakeProc
	cmds    map[int]Command
	spawned chan int // receives each rank once it is started
}

func newFakeSpawner(t *testing.T) *fakeSpawner {
	return &fakeSpawner{
		t: t, ignore: map[int]bool{}, failAt: map[int]error{}, exitNow: map[int]int{},
		stdout: map[int]string{}, stderr: map[int]string{},
		procs: map[int]*fakeProc{}, cmds: map[int]Command{}, spawned: make(chan int, 64),
	}
}

// spawnerFor gives the same fake for every host (Config.SpawnerFor).
func (f *fakeSpawner) spawnerFor(string) Spawner { return f }

func (f *fakeSpawner) Spawn(_ context.Context, s Slot, c Command, stdout, stderr io.Writer) (Process, error) {
	if err := f.failAt[s.Rank]; err != nil {
		return nil, err
	}
	p := &fakeProc{slot: s, ignoreTerm: f.ignore[s.Rank], onSignal: f.onSignal, done: make(chan struct{}),
		stdout: stdout, stderr: stderr}
	_, _ = io.WriteString(stdout, f.stdout[s.Rank])
	_, _ = io.WriteString(stderr, f.stderr[s.Rank])
	f.mu.Lock()
	f.procs[s.Rank] = p
	f.cmds[s.Rank] = c
	f.mu.Unlock()
	if status, ok := f.exitNow[s.Rank]; ok {
		p.exit(status)
	}
	f.spawned <- s.Rank
	return p, nil
}

// waitSpawned waits until n ranks have been started.
// spawnWait bounds how long waitSpawned waits for each rank: a guard
// against a hang, generous because an elastic job spawns only after its
// discovery script (a shell) has run, which on a loaded 2-CPU machine
// under the race detector took over 5 s once.
const spawnWait = 30 * time.Second

func (f *fakeSpawner) waitSpawned(n int) {
	f.t.Helper()
	for range n {
		select {
		case <-f.spawned:
		case <-time.After(spawnWait):
			f.t.Fatalf("ranks not spawned within %v", spawnWait)
		}
	}
}

func (f *fakeSpawner) proc(rank int) *fakeProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[rank]
}

func (f *fakeSpawner) cmd(rank int) Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cmds[rank]
}

// fakeProc is a pretend rank: it runs until told to exit, or until SIGTERM
// (unless it ignores it) or Kill.
type fakeProc struct {
	slot           Slot
	stdout, stderr io.Writer // where the rank's output goes
	ignoreTerm     bool
	onSignal       func(p *fakeProc, sig os.Signal)

	mu      sync.Mutex
	signals []os.Signal
	termAt  time.Time
	killAt  time.Time
	once    sync.Once
	err     error
	done    chan struct{}
}

func (p *fakeProc) Wait() error {
	<-p.done
	return p.err
}

func (p *fakeProc) Signal(sig os.Signal) error {
	if p.onSignal != nil {
		p.onSignal(p, sig)
	}
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	if sig == syscall.SIGTERM && p.termAt.IsZero() {
		p.termAt = time.Now()
	}
	p.mu.Unlock()
	if sig == syscall.SIGTERM && !p.ignoreTerm {
		p.finish(&ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: -1, Signal: "SIGTERM"})
	}
	return nil
}

func (p *fakeProc) Kill() error {
	p.mu.Lock()
	p.killAt = time.Now()
	p.mu.Unlock()
	p.finish(&ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: -1, Signal: "SIGKILL"})
	return nil
}

// exit ends the rank with status.
func (p *fakeProc) exit(status int) {
	var err error
	if status != 0 {
		err = &ExitError{Rank: p.slot.Rank, Host: p.slot.Host, Status: status}
	}
	p.finish(err)
}

func (p *fakeProc) finish(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.done)
	})
}

// record returns the signals received and when SIGTERM and Kill came.
func (p *fakeProc) record() (signals []os.Signal, termAt, killAt time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]os.Signal(nil), p.signals...), p.termAt, p.killAt
}

// launchAsync runs Launch in a goroutine and returns its result channel.
func launchAsync(ctx context.Context, cfg Config) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- Launch(ctx, cfg) }()
	return errc
}

// await returns Launch's result, failing the test after d.
func await(t *testing.T, errc <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(d):
		t.Fatalf("Launch did not return within %v", d)
		return nil
	}
}

// fakeConfig is a job of np ranks on hosts, run by f, output to out.
func fakeConfig(t *testing.T, f *fakeSpawner, hosts string, np int, out io.Writer) Config {
	t.Helper()
	hs, err := ParseHosts(hosts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.NP = np
	cfg.Hosts = hs
	cfg.Command = []string{"train", "--epochs", "3"}
	cfg.BindAddr = "127.0.0.1"
	cfg.SpawnerFor = f.spawnerFor
	cfg.Stdout, cfg.Stderr = out, out
	return cfg
}

// errNoStart is a spawn failure of the fake.
var errNoStart = errors.New("runner: rank 1 on b: start \"train\": no such file")

// exitErrorOf extracts the *ExitError from err.
func exitErrorOf(t *testing.T, err error) *ExitError {
	t.Helper()
	ee, ok := errors.AsType[*ExitError](err)
	if !ok {
		t.Fatalf("error %v (%T) wraps no *ExitError", err, err)
	}
	return ee
}

func fmtSignals(s []os.Signal) string { return fmt.Sprint(s) }

// fakeServer is a jobServer without a network: a key-value store, the
// ranks not registered yet, and the reason of the abort. It is used by one
// goroutine.
type fakeServer struct {
	values  map[string][]byte
	missing []rendezvous.Peer
	size    int
	changed chan struct{} // closed, and made anew, at each registration
	aborted string
}

func newFakeServer(size int) *fakeServer {
	s := &fakeServer{values: map[string][]byte{}, size: size, changed: make(chan struct{})}
	for r := range size {
		s.missing = append(s.missing, rendezvous.Peer{Rank: r})
	}
	return s
}

func (s *fakeServer) Abort(reason string) { s.aborted = reason }
func (s *fakeServer) Value(key string) ([]byte, bool) {
	v, ok := s.values[key]
	return v, ok
}
func (s *fakeServer) Registered() int            { return s.size - len(s.missing) }
func (s *fakeServer) Missing() []rendezvous.Peer { return s.missing }
func (s *fakeServer) Changed() <-chan struct{}   { return s.changed }
func (s *fakeServer) Set(_ context.Context, key string, value []byte) error {
	s.values[key] = value
	return nil
}

// register registers rank, as the rendezvous does when hvd.Init calls.
func (s *fakeServer) register(rank int) {
	s.missing = slices.DeleteFunc(s.missing, func(p rendezvous.Peer) bool { return p.Rank == rank })
	close(s.changed)
	s.changed = make(chan struct{})
}

// fakeRanks returns n started ranks on host "a", run by fakeProcs that
// ignore SIGTERM where ignore says so.
func fakeRanks(n int, ignore ...int) []*rankProc {
	rs := make([]*rankProc, n)
	for r := range rs {
		s := Slot{Host: "a", Rank: r, Size: n}
		rs[r] = &rankProc{slot: s, proc: &fakeProc{slot: s, ignoreTerm: slices.Contains(ignore, r), done: make(chan struct{})}}
	}
	return rs
}
