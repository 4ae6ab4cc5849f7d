package ps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorovod/gorovod/internal/auth"
	"go.uber.org/goleak"
)

// coordBound is how long a test waits for something that should happen soon;
// generous, for a loaded two-core machine under -race.
const coordBound = 30 * time.Second

var (
	coordSecret      = bytes.Repeat([]byte{7}, auth.SecretSize)
	coordOtherSecret = bytes.Repeat([]byte{8}, auth.SecretSize)
)

// coordCheckLeaks fails t if goroutines started during it outlive its
// cleanups. Register it first: cleanups run last-registered first.
func coordCheckLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// coordEventually waits for cond, checking it every few milliseconds.
func coordEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(coordBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// coordTestLogger logs to stderr at debug level when PS_TEST_LOG is set.
func coordTestLogger() *slog.Logger {
	if os.Getenv("PS_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func startCoordinator(t *testing.T, cfg CoordinatorConfig) *Coordinator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = coordTestLogger()
	}
	if cfg.Addr == "" && cfg.Listener == nil {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Secret == nil {
		cfg.Secret = coordSecret
	}
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// runningWorker is a RunWorker in the background.
type runningWorker struct {
	cancel context.CancelFunc
	done   chan error // RunWorker's result
}

func startWorker(t *testing.T, cfg WorkerConfig) *runningWorker {
	t.Helper()
	if cfg.Secret == nil {
		cfg.Secret = coordSecret
	}
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = coordTestLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &runningWorker{cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- RunWorker(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(coordBound):
			t.Errorf("worker %d did not end", cfg.Index)
		}
	})
	return w
}

// wait is RunWorker's result, within coordBound.
func (w *runningWorker) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		return err
	case <-time.After(coordBound):
		t.Fatal("RunWorker did not return")
		return nil
	}
}

// ledger counts executions of steps by their arguments.
type ledger struct {
	mu   sync.Mutex
	runs map[string]int
	by   map[string][]int // workers that ran it
}

func newLedger() *ledger { return &ledger{runs: map[string]int{}, by: map[string][]int{}} }

func (l *ledger) record(args []byte, worker int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[string(args)]++
	l.by[string(args)] = append(l.by[string(args)], worker)
	return l.runs[string(args)]
}

func (l *ledger) count(args string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[args]
}

// echo answers its arguments and the worker's index, "7@w2".
func (l *ledger) echo(_ context.Context, w *WorkerContext, args []byte) ([]byte, error) {
	l.record(args, w.Index)
	return fmt.Appendf(nil, "%s@w%d", args, w.Index), nil
}

func (c *Coordinator) statsNow() (accepted, discarded int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.accepted, c.stats.discarded
}

func coordWait(t *testing.T, rv *RemoteValue) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coordBound)
	defer cancel()
	v, err := rv.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: no result within %s", rv, coordBound)
	}
	return v, err
}

func coordJoin(t *testing.T, c *Coordinator) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coordBound)
	defer cancel()
	err := c.Join(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join did not return within %s", coordBound)
	}
	return err
}

func TestCoordinatorRunsEveryStepOnce(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	l := newLedger()
	var workers []*runningWorker
	for i := range 3 {
		workers = append(workers, startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: i, Workers: 3, Steps: map[string]StepFunc{"echo": l.echo}}))
	}
	coordEventually(t, "3 workers", func() bool { return c.Workers() == 3 })
	const n = 300
	rvs := make([]*RemoteValue, n)
	for i := range rvs {
		rvs[i] = c.Schedule("echo", []byte(strconv.Itoa(i)))
	}
	if err := coordJoin(t, c); err != nil {
		t.Fatalf("Join: %v", err)
	}
	for i, rv := range rvs {
		select {
		case <-rv.Done():
		default:
			t.Fatalf("%v not done after Join", rv)
		}
		v, err := rv.Wait(context.Background())
		if err != nil {
			t.Fatalf("%v: %v", rv, err)
		}
		arg, worker, ok := strings.Cut(string(v), "@w")
		if !ok || arg != strconv.Itoa(i) || (worker != "0" && worker != "1" && worker != "2") {
			t.Fatalf("step %d got %q", i, v)
		}
		if got := l.count(strconv.Itoa(i)); got != 1 {
			t.Fatalf("step %d ran %d times, want once", i, got)
		}
	}
	if accepted, discarded := c.statsNow(); accepted != n || discarded != 0 {
		t.Fatalf("accepted %d, discarded %d results; want %d, 0", accepted, discarded, n)
	}
	c.Stop()
	for i, w := range workers {
		if err := w.wait(t); err != nil {
			t.Errorf("worker %d: RunWorker = %v after Stop, want nil", i, err)
		}
	}
}

// cutProxy relays TCP connections to target until cut: then it closes
// every connection and refuses new ones (accepts and closes them) until
// restored. It stands for a worker's network going away.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			in.Close()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
		p.mu.Unlock()
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	p.down = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// A worker whose connection breaks in the middle of a step is dropped at
// once; its step runs again on another worker, whose result is the
// step's. When the first worker comes back and reports the step after all,
// its result is discarded, and it takes work again.
func TestCoordinatorRequeuesTheStepOfABrokenWorker(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	p := newCutProxy(t, c.Addr())
	l := newLedger()
	started, release := make(chan struct{}), make(chan struct{})
	steps := map[string]StepFunc{"echo": l.echo, "hold": func(ctx context.Context, w *WorkerContext, args []byte) ([]byte, error) {
		if l.record(args, w.Index) == 1 {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return fmt.Appendf(nil, "%s@w%d", args, w.Index), nil
	}}
	a := startWorker(t, WorkerConfig{ChiefAddr: p.addr(), Index: 0, Steps: steps})
	x := c.Schedule("hold", []byte("x"))
	<-started
	b := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: steps})
	coordEventually(t, "2 workers", func() bool { return c.Workers() == 2 })

	p.cut()
	v, err := coordWait(t, x)
	if err != nil || string(v) != "x@w1" {
		t.Fatalf("requeued step: %q, %v; want x@w1 from worker 1", v, err)
	}
	p.restore()
	close(release) // worker 0 finishes the step after all and reports it
	coordEventually(t, "the late result discarded", func() bool { _, d := c.statsNow(); return d == 1 })
	coordEventually(t, "worker 0 back", func() bool { return c.Workers() == 2 })

	var rvs []*RemoteValue
	for i := range 40 {
		rvs = append(rvs, c.Schedule("echo", []byte(strconv.Itoa(i))))
	}
	if err := coordJoin(t, c); err != nil {
		t.Fatalf("Join: %v", err)
	}
	for i, rv := range rvs {
		v, err := rv.Wait(context.Background())
		if err != nil || !strings.HasPrefix(string(v), strconv.Itoa(i)+"@w") {
			t.Fatalf("step %d: %q, %v", i, v, err)
		}
		if n := l.count(strconv.Itoa(i)); n != 1 {
			t.Fatalf("step %d ran %d times", i, n)
		}
	}
	if n := l.count("x"); n != 2 {
		t.Fatalf("the broken worker's step ran %d times, want 2 (once on each worker)", n)
	}
	if v, _ := x.Wait(context.Background()); string(v) != "x@w1" {
		t.Fatalf("the late result replaced the first: %q", v)
	}
	if accepted, discarded := c.statsNow(); accepted != 41 || discarded != 1 {
		t.Fatalf("accepted %d, discarded %d results; want 41, 1", accepted, discarded)
	}
	c.Stop()
	for _, w := range []*runningWorker{a, b} {
		if err := w.wait(t); err != nil {
			t.Errorf("RunWorker = %v after Stop, want nil", err)
		}
	}
}

// manualWorker is a worker's client without RunWorker's loop: the test
// makes its calls.
func manualWorker(t *testing.T, addr string, index int, incarnation uint64) *coordWorker {
	t.Helper()
	g, err := auth.NewGuard(coordSecret, false)
	if err != nil {
		t.Fatal(err)
	}
	w := newCoordWorker(WorkerConfig{ChiefAddr: addr, Index: index, Workers: index + 1}, g)
	w.id.Incarnation = incarnation
	go w.own()
	t.Cleanup(w.close)
	return w
}

func (w *coordWorker) next(t *testing.T) *coordAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coordBound)
	defer cancel()
	for {
		a, err := w.request(ctx, "Next", &coordNextReq{Worker: w.id, Wait: time.Second}, time.Second)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if a.Kind == coordAnsStep {
			return a
		}
	}
}

func (w *coordWorker) report(id uint64, result string) error {
	ctx, cancel := context.WithTimeout(context.Background(), coordBound)
	defer cancel()
	_, err := w.request(ctx, "Done", &coordDoneReq{Worker: w.id, ID: id, Result: []byte(result)}, 0)
	return err
}

// A worker that stays connected but falls silent (a hung process) is
// dropped after the heartbeat timeout and its step runs elsewhere; its
// late result is discarded.
func TestCoordinatorDropsASilentWorker(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{HeartbeatTimeout: 400 * time.Millisecond})
	silent := manualWorker(t, c.Addr(), 0, 1)
	x := c.Schedule("echo", []byte("x"))
	a := silent.next(t)
	if a.Name != "echo" || string(a.Args) != "x" {
		t.Fatalf("got step %q(%q)", a.Name, a.Args)
	}
	coordEventually(t, "the silent worker dropped", func() bool { return c.Workers() == 0 })
	l := newLedger()
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: map[string]StepFunc{"echo": l.echo}})
	v, err := coordWait(t, x)
	if err != nil || string(v) != "x@w1" {
		t.Fatalf("step of the silent worker: %q, %v; want x@w1", v, err)
	}
	if err := silent.report(a.ID, "late"); err != nil {
		t.Fatalf("late report: %v", err)
	}
	if v, _ := x.Wait(context.Background()); string(v) != "x@w1" {
		t.Fatalf("the late result replaced the first: %q", v)
	}
	if accepted, discarded := c.statsNow(); accepted != 1 || discarded != 1 {
		t.Fatalf("accepted %d, discarded %d; want 1, 1", accepted, discarded)
	}
}

// OnWorkerLost hears of a dropped worker (here a silent one) by its
// index, and not of the workers that Stop tells to go.
func TestCoordinatorOnWorkerLost(t *testing.T) {
	coordCheckLeaks(t)
	lost := make(chan int, 4)
	c := startCoordinator(t, CoordinatorConfig{HeartbeatTimeout: 400 * time.Millisecond, OnWorkerLost: func(i int) { lost <- i }})
	silent := manualWorker(t, c.Addr(), 3, 4)
	c.Schedule("x", nil)
	silent.next(t) // joins, takes the step, and falls silent
	coordEventually(t, "the silent worker dropped", func() bool { return c.Workers() == 0 })
	select {
	case i := <-lost:
		if i != 3 {
			t.Errorf("OnWorkerLost(%d), want 3", i)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnWorkerLost was not called for the dropped worker")
	}
	idle := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Workers: 4, Steps: map[string]StepFunc{"x": func(context.Context, *WorkerContext, []byte) ([]byte, error) { return nil, nil }}})
	coordEventually(t, "the new worker joined", func() bool { return c.Workers() == 1 })
	c.Stop()
	if err := idle.wait(t); err != nil {
		t.Errorf("RunWorker = %v after Stop, want nil", err)
	}
	select {
	case i := <-lost:
		t.Errorf("OnWorkerLost(%d) for a worker Stop told to go", i)
	default:
	}
}

// OnWorkerIdle hears once of a worker that asks for a step while the
// queue is empty, not again while it stays idle, and again after it was
// handed a step and finds the queue empty once more; never after Stop.
func TestCoordinatorOnWorkerIdle(t *testing.T) {
	coordCheckLeaks(t)
	idle := make(chan int, 8)
	c := startCoordinator(t, CoordinatorConfig{HeartbeatTimeout: 2 * time.Second, OnWorkerIdle: func(i int) { idle <- i }})
	w := manualWorker(t, c.Addr(), 2, 1)
	ask := func() *coordAnswer {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), coordBound)
		defer cancel()
		a, err := w.request(ctx, "Next", &coordNextReq{Worker: w.id, Wait: 50 * time.Millisecond}, time.Second)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		return a
	}
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case i := <-idle:
			if !want {
				t.Errorf("%s: OnWorkerIdle(%d), want no call", what, i)
			} else if i != 2 {
				t.Errorf("%s: OnWorkerIdle(%d), want 2", what, i)
			}
		case <-time.After(300 * time.Millisecond):
			if want {
				t.Errorf("%s: OnWorkerIdle was not called", what)
			}
		}
	}
	if a := ask(); a.Kind != coordAnsNothing {
		t.Fatalf("Next on an empty queue: kind %v", a.Kind)
	}
	expect("first ask on an empty queue", true)
	ask()
	expect("asking again while idle", false)
	c.Schedule("x", nil)
	a := ask()
	if a.Kind != coordAnsStep {
		t.Fatalf("Next with a queued step: kind %v", a.Kind)
	}
	expect("handed a step", false)
	if err := w.report(a.ID, "done"); err != nil {
		t.Fatal(err)
	}
	ask()
	expect("empty queue after a step", true)
	c.Stop()
	expect("after Stop", false)
}

// A new incarnation of a worker index replaces the old one: the old one's
// step goes to the queue, its result is discarded even while the step is
// still pending, and it is told it was replaced.
func TestCoordinatorNewIncarnationReplacesTheOld(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	old := manualWorker(t, c.Addr(), 0, 1)
	x := c.Schedule("echo", []byte("x"))
	a1 := old.next(t)
	fresh := manualWorker(t, c.Addr(), 0, 2)
	a2 := fresh.next(t)
	if a1.ID != a2.ID {
		t.Fatalf("the new incarnation got step %d, want the old one's %d", a2.ID, a1.ID)
	}
	if err := old.report(a1.ID, "old"); !errors.Is(err, ErrWorkerReplaced) {
		t.Fatalf("the old incarnation's report: %v, want ErrWorkerReplaced", err)
	}
	select {
	case <-x.Done():
		t.Fatal("the old incarnation's result was taken")
	default:
	}
	if err := fresh.report(a2.ID, "new"); err != nil {
		t.Fatal(err)
	}
	if v, err := coordWait(t, x); err != nil || string(v) != "new" {
		t.Fatalf("step: %q, %v; want the new incarnation's result", v, err)
	}
	if accepted, discarded := c.statsNow(); accepted != 1 || discarded != 1 {
		t.Fatalf("accepted %d, discarded %d; want 1, 1", accepted, discarded)
	}
	if n := c.Workers(); n != 1 {
		t.Fatalf("Workers() = %d, want 1", n)
	}
}

// RunWorker ends with ErrWorkerReplaced when a newer one with its index
// joins.
func TestRunWorkerReplacedByANewerOne(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	l := newLedger()
	steps := map[string]StepFunc{"echo": l.echo}
	first := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: steps})
	coordEventually(t, "the first worker", func() bool { return c.Workers() == 1 })
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: steps})
	if err := first.wait(t); !errors.Is(err, ErrWorkerReplaced) {
		t.Fatalf("the replaced RunWorker returned %v, want ErrWorkerReplaced", err)
	}
	if v, err := coordWait(t, c.Schedule("echo", []byte("y"))); err != nil || string(v) != "y@w0" {
		t.Fatalf("step after the replacement: %q, %v", v, err)
	}
}

func TestCoordinatorLateWorkerTakesWork(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	l := newLedger()
	started := make(chan struct{})
	steps := map[string]StepFunc{"echo": l.echo, "hold": func(ctx context.Context, _ *WorkerContext, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done() // until Stop
		return nil, ctx.Err()
	}}
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: steps})
	c.Schedule("hold", nil)
	<-started
	y := c.Schedule("echo", []byte("y"))
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: steps})
	if v, err := coordWait(t, y); err != nil || string(v) != "y@w1" {
		t.Fatalf("step for the late worker: %q, %v; want y@w1", v, err)
	}
}

func TestCoordinatorUnknownStepFails(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	l := newLedger()
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: map[string]StepFunc{"echo": l.echo, "apply": l.echo}})
	_, err := coordWait(t, c.Schedule("tarin", []byte("x")))
	if !errors.Is(err, ErrUnknownStep) {
		t.Fatalf("unknown step: %v, want ErrUnknownStep", err)
	}
	for _, want := range []string{`"tarin"`, `"apply", "echo"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if jerr := coordJoin(t, c); !errors.Is(jerr, ErrUnknownStep) {
		t.Fatalf("Join: %v, want the unknown step's error", jerr)
	}
	if jerr := coordJoin(t, c); jerr != nil {
		t.Fatalf("second Join: %v, want nil (the error was reported)", jerr)
	}
	if n := l.count("x"); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

func TestCoordinatorStepErrorIsNotRerun(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	l := newLedger()
	steps := map[string]StepFunc{"echo": l.echo, "fail": func(_ context.Context, w *WorkerContext, args []byte) ([]byte, error) {
		l.record(args, w.Index)
		return nil, errors.New("loss is NaN")
	}, "panic": func(_ context.Context, w *WorkerContext, args []byte) ([]byte, error) {
		l.record(args, w.Index)
		panic("index out of range")
	}}
	for i := range 2 {
		startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: i, Steps: steps})
	}
	f := c.Schedule("fail", []byte("f"))
	pn := c.Schedule("panic", []byte("p"))
	var rest []*RemoteValue
	for i := range 10 {
		rest = append(rest, c.Schedule("echo", []byte(strconv.Itoa(i))))
	}
	err := coordJoin(t, c)
	// The first error reported: either step's, as two workers run them.
	if !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "loss is NaN") && !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Join: %v, want the first step error", err)
	}
	if _, err := f.Wait(context.Background()); !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), `step "fail"`) || !strings.Contains(err.Error(), "loss is NaN") {
		t.Fatalf("failed step: %v", err)
	}
	if _, err := pn.Wait(context.Background()); !errors.Is(err, ErrStepFailed) || !strings.Contains(err.Error(), "panicked: index out of range") {
		t.Fatalf("panicking step: %v", err)
	}
	for i, rv := range rest {
		if _, err := rv.Wait(context.Background()); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if l.count("f") != 1 || l.count("p") != 1 {
		t.Fatalf("failed steps ran %d and %d times, want once each", l.count("f"), l.count("p"))
	}
}

// coordFakeServerError stands for the parameter servers' *ServerError.
type coordFakeServerError struct {
	index int
	addr  string
}

func (e *coordFakeServerError) Error() string {
	return fmt.Sprintf("ps: parameter server %d (%s): connection refused", e.index, e.addr)
}

func (e *coordFakeServerError) PSServer() (int, string) { return e.index, e.addr }

func TestCoordinatorServerErrorFailsTheJob(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	started := make(chan struct{})
	steps := map[string]StepFunc{
		"hold": func(ctx context.Context, _ *WorkerContext, _ []byte) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"push": func(context.Context, *WorkerContext, []byte) ([]byte, error) {
			return nil, fmt.Errorf("push gradients: %w", &coordFakeServerError{1, "10.0.0.9:7000"})
		},
	}
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: steps})
	c.Schedule("hold", nil)
	<-started // worker 0 is busy: the next steps wait in the queue
	queued := []*RemoteValue{c.Schedule("push", nil), c.Schedule("push", nil)}
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: steps})
	err := coordJoin(t, c)
	if !errors.Is(err, ErrCoordinatorFailed) || !strings.Contains(err.Error(), "parameter server 1 (10.0.0.9:7000)") {
		t.Fatalf("Join: %v, want a failure naming the server", err)
	}
	var sf serverFailure
	if !errors.As(err, &sf) {
		t.Fatalf("Join's error %v has no PSServer", err)
	}
	if i, a := sf.PSServer(); i != 1 || a != "10.0.0.9:7000" {
		t.Fatalf("PSServer() = %d, %q", i, a)
	}
	for _, rv := range append(queued, c.Schedule("push", nil)) {
		if _, err := coordWait(t, rv); !errors.Is(err, ErrCoordinatorFailed) || !strings.Contains(err.Error(), "10.0.0.9:7000") {
			t.Fatalf("%v: %v, want the server's failure", rv, err)
		}
	}
}

func TestCoordinatorFail(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	pending := c.Schedule("echo", nil) // no worker: stays pending
	boom := errors.New("ps: parameter server 0 (h:1): gone")
	c.Fail(boom)
	c.Fail(errors.New("second"))
	for _, rv := range []*RemoteValue{pending, c.Schedule("echo", nil)} {
		if _, err := coordWait(t, rv); !errors.Is(err, boom) || !errors.Is(err, ErrCoordinatorFailed) {
			t.Fatalf("%v: %v, want Fail's error", rv, err)
		}
	}
	if err := coordJoin(t, c); !errors.Is(err, boom) {
		t.Fatalf("Join: %v", err)
	}
}

func TestCoordinatorTooLarge(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	if _, err := coordWait(t, c.Schedule("echo", make([]byte, MaxStepBytes+1))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized args: %v", err)
	}
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: map[string]StepFunc{"big": func(context.Context, *WorkerContext, []byte) ([]byte, error) {
		return make([]byte, MaxStepBytes+1), nil
	}}})
	if _, err := coordWait(t, c.Schedule("big", nil)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized result: %v", err)
	}
}

func TestRunWorkerWrongSecretRefused(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	w := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Secret: coordOtherSecret, Index: 0, Steps: map[string]StepFunc{"echo": newLedger().echo}})
	if err := w.wait(t); !errors.Is(err, auth.ErrAuth) || !strings.Contains(err.Error(), c.Addr()) {
		t.Fatalf("RunWorker with a wrong secret: %v, want an auth error naming the chief", err)
	}
	if n := c.Workers(); n != 0 {
		t.Fatalf("Workers() = %d with a wrong secret", n)
	}
}

func TestCoordinatorOverTLS(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{TLS: true})
	startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), TLS: true, Index: 0, Steps: map[string]StepFunc{"echo": newLedger().echo}})
	if v, err := coordWait(t, c.Schedule("echo", []byte("t"))); err != nil || string(v) != "t@w0" {
		t.Fatalf("over TLS: %q, %v", v, err)
	}
	plain := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: map[string]StepFunc{"echo": newLedger().echo}})
	if err := plain.wait(t); !errors.Is(err, auth.ErrMismatch) {
		t.Fatalf("plain worker against a TLS chief: %v, want ErrMismatch", err)
	}
}

// Stop tells idle and busy workers to exit (RunWorker returns nil) and
// fails what was not done.
func TestStopEndsRunWorker(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	started := make(chan struct{})
	steps := map[string]StepFunc{"hold": func(ctx context.Context, _ *WorkerContext, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	busy := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: steps})
	held := c.Schedule("hold", nil)
	<-started
	idle := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 1, Steps: steps})
	coordEventually(t, "2 workers", func() bool { return c.Workers() == 2 })
	start := time.Now()
	c.Stop()
	c.Stop() // idempotent
	if d := time.Since(start); d >= DefaultHeartbeatTimeout {
		t.Errorf("Stop took %s: it waited for its coordBound although every worker heard it", d)
	}
	for name, w := range map[string]*runningWorker{"busy": busy, "idle": idle} {
		if err := w.wait(t); err != nil {
			t.Errorf("%s worker: RunWorker = %v after Stop, want nil", name, err)
		}
	}
	for _, rv := range []*RemoteValue{held, c.Schedule("late", nil)} {
		if _, err := coordWait(t, rv); !errors.Is(err, ErrCoordinatorStopped) {
			t.Errorf("%v after Stop: %v, want ErrCoordinatorStopped", rv, err)
		}
	}
	if err := coordJoin(t, c); !errors.Is(err, ErrCoordinatorStopped) {
		t.Errorf("Join after Stop: %v, want ErrCoordinatorStopped", err)
	}
}

// A worker that loses the chief gives up after the heartbeat timeout,
// naming the chief.
func TestRunWorkerGivesUpOnALostChief(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{HeartbeatTimeout: 300 * time.Millisecond})
	p := newCutProxy(t, c.Addr())
	w := startWorker(t, WorkerConfig{ChiefAddr: p.addr(), Index: 0, Steps: map[string]StepFunc{"echo": newLedger().echo}})
	if v, err := coordWait(t, c.Schedule("echo", []byte("a"))); err != nil || string(v) != "a@w0" {
		t.Fatalf("step: %q, %v", v, err)
	}
	p.cut()
	err := w.wait(t)
	if !errors.Is(err, ErrChiefUnreachable) || !strings.Contains(err.Error(), p.addr()) {
		t.Fatalf("RunWorker after losing the chief: %v, want ErrChiefUnreachable naming %s", err, p.addr())
	}
}

// The same while a step runs: the step's context is cancelled.
func TestRunWorkerGivesUpOnALostChiefMidStep(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{HeartbeatTimeout: 300 * time.Millisecond})
	p := newCutProxy(t, c.Addr())
	started := make(chan struct{})
	w := startWorker(t, WorkerConfig{ChiefAddr: p.addr(), Index: 0, Steps: map[string]StepFunc{"hold": func(ctx context.Context, _ *WorkerContext, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}})
	c.Schedule("hold", nil)
	<-started
	p.cut()
	if err := w.wait(t); !errors.Is(err, ErrChiefUnreachable) {
		t.Fatalf("RunWorker: %v, want ErrChiefUnreachable", err)
	}
}

func TestCoordinatorJoinHonoursContext(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	c.Schedule("echo", nil) // no worker
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Join(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join: %v", err)
	}
}

func TestConfigsHideTheSecret(t *testing.T) {
	for _, s := range []string{
		fmt.Sprintf("%v %+v %#v", CoordinatorConfig{Addr: "h:1", Secret: coordSecret}, CoordinatorConfig{Secret: coordSecret, Addr: "h:1"}, CoordinatorConfig{Secret: coordSecret, Addr: "h:1"}),
		fmt.Sprintf("%v %+v %#v", WorkerConfig{ChiefAddr: "h:1", Secret: coordSecret}, WorkerConfig{Secret: coordSecret}, WorkerConfig{Secret: coordSecret}),
	} {
		if strings.Contains(s, "7 7 7") || strings.Contains(s, "0x7") || strings.Contains(s, "\\a") {
			t.Fatalf("config printed its secret: %s", s)
		}
	}
}

func TestWorkerConfigValidation(t *testing.T) {
	ok := WorkerConfig{ChiefAddr: "h:1", Secret: coordSecret, Index: 0, Workers: 1, Steps: map[string]StepFunc{"s": newLedger().echo}}
	for name, mutate := range map[string]func(*WorkerConfig){
		"no chief":      func(c *WorkerConfig) { c.ChiefAddr = "" },
		"short secret":  func(c *WorkerConfig) { c.Secret = c.Secret[:8] },
		"index":         func(c *WorkerConfig) { c.Index = 1 },
		"no steps":      func(c *WorkerConfig) { c.Steps = nil },
		"nil step":      func(c *WorkerConfig) { c.Steps = map[string]StepFunc{"s": nil} },
		"negative beat": func(c *WorkerConfig) { c.HeartbeatTimeout = -1 },
	} {
		cfg := ok
		mutate(&cfg)
		if err := RunWorker(context.Background(), cfg); err == nil {
			t.Errorf("%s: RunWorker accepted %v", name, cfg)
		}
	}
	if _, err := NewCoordinator(CoordinatorConfig{Secret: coordSecret}); err == nil {
		t.Error("NewCoordinator accepted neither a listener nor an address")
	}
	if _, err := NewCoordinator(CoordinatorConfig{Addr: "127.0.0.1:0", Secret: coordSecret[:3]}); err == nil {
		t.Error("NewCoordinator accepted a short secret")
	}
}

func (c *Coordinator) polling(id coordWorkerID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.members[id]; m != nil {
		return m.polling
	}
	return 0
}

// A Next call that the worker gave up on (its call timed out) while the
// chief still holds it must not take the step meant for the worker's
// next call: the step would wait, unseen, in the worker's name.
func TestCoordinatorOnlyTheLatestPollTakesAStep(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	w := manualWorker(t, c.Addr(), 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), coordBound)
	defer cancel()
	if err := w.awaitLink(ctx); err != nil {
		t.Fatal(err)
	}
	req := func() *coordNextReq { return &coordNextReq{Worker: w.id, Wait: 2 * time.Second} }
	if _, err := w.call(ctx, "Next", req(), 20*time.Millisecond); err == nil {
		t.Fatal("a call held 2s answered within 20ms")
	}
	coordEventually(t, "the abandoned poll held", func() bool { return c.polling(w.id) == 1 })
	type answer struct {
		a   *coordAnswer
		err error
	}
	got := make(chan answer, 1)
	go func() {
		a, err := w.call(ctx, "Next", req(), coordBound)
		got <- answer{a, err}
	}()
	coordEventually(t, "both polls held", func() bool { return c.polling(w.id) == 2 })
	c.Schedule("echo", []byte("x"))
	r := <-got
	if r.err != nil || r.a.Kind != coordAnsStep || string(r.a.Args) != "x" {
		t.Fatalf("the latest poll got %+v, %v; want the step", r.a, r.err)
	}
}

// The coordinator owns the listener it is given: Stop closes it, started
// or not, and a stopped coordinator does not start.
func TestCoordinatorStopClosesItsListener(t *testing.T) {
	coordCheckLeaks(t)
	for _, start := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCoordinator(CoordinatorConfig{Listener: ln, Secret: coordSecret})
		if err != nil {
			t.Fatal(err)
		}
		if start {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if c.Addr() != ln.Addr().String() {
				t.Fatalf("Addr() = %q, want the listener's %s", c.Addr(), ln.Addr())
			}
		}
		c.Stop()
		_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second)) // fail, not hang, if open
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("started %t: Accept after Stop: %v, want net.ErrClosed", start, err)
		}
		if err := c.Start(); !errors.Is(err, ErrCoordinatorStopped) {
			t.Fatalf("Start after Stop: %v", err)
		}
	}
}

// A worker started before the chief listens (TF_CONFIG's fixed addresses)
// keeps trying, with back-off, and joins once the chief is up.
func TestRunWorkerWaitsForTheChief(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	p := newCutProxy(t, c.Addr())
	p.cut() // the chief is "not up yet": connections are refused
	w := startWorker(t, WorkerConfig{ChiefAddr: p.addr(), Index: 0, Steps: map[string]StepFunc{"echo": newLedger().echo}})
	time.Sleep(300 * time.Millisecond) // a few refused attempts; nothing to wait on
	select {
	case err := <-w.done:
		t.Fatalf("RunWorker gave up before reaching the chief: %v", err)
	default:
	}
	p.restore()
	if v, err := coordWait(t, c.Schedule("echo", []byte("z"))); err != nil || string(v) != "z@w0" {
		t.Fatalf("step: %q, %v", v, err)
	}
}

func TestRunWorkerReturnsWhenItsContextEnds(t *testing.T) {
	coordCheckLeaks(t)
	c := startCoordinator(t, CoordinatorConfig{})
	started := make(chan struct{})
	w := startWorker(t, WorkerConfig{ChiefAddr: c.Addr(), Index: 0, Steps: map[string]StepFunc{"hold": func(ctx context.Context, _ *WorkerContext, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}})
	c.Schedule("hold", nil)
	<-started
	w.cancel()
	if err := w.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunWorker: %v, want context.Canceled", err)
	}
	coordEventually(t, "the worker gone from the pool", func() bool { return c.Workers() == 0 })
}
