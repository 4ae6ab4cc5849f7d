package ps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/gorovod/gorovod/internal/metricpush"
	"github.com/gorovod/gorovod/jobenv"
	"github.com/gorovod/gorovod/rendezvous"
)

// Job is this process's place in a running parameter-server job, once
// every task is up: its role, the job's shape, where the chief and the
// servers listen, and what every connection needs (the secret, TLS).
type Job struct {
	Role    string // jobenv.RoleChief, RoleWorker or RolePS
	Index   int    // among the tasks of its role (the chief's: 0)
	Workers int    // M
	Servers int    // N
	Rank    int    // this task's rank: the chief 0, worker i 1+i, server i 1+M+i

	ChiefAddr   string   // where the chief (the coordinator) listens
	ServerAddrs []string // where each parameter server listens, by index

	// Listener, on the chief and on the servers, already listens on the
	// address published for this task (ChiefAddr, ServerAddrs[Index]):
	// give it to the coordinator or the server, which owns it from its
	// first Accept on (Close leaves it open then). Nil on a worker.
	Listener net.Listener

	Secret    []byte        // the job secret: every connection proves it
	TLS       bool          // connections run inside TLS (GOROVOD_TLS)
	Logger    *slog.Logger  // the program's logger at GOROVOD_LOG_LEVEL, with role and index
	OpTimeout time.Duration // the bound on each wait for another task (GOROVOD_OP_TIMEOUT)
	Hostname  string        // this task's host, as the launcher names it

	rdv *rendezvous.Client // the job's rendezvous, kept under gorun; nil otherwise
	srv *rendezvous.Server // the rendezvous the chief serves (Slurm, mpirun, ...); nil otherwise
	pub *metricpush.Pusher // this task's metrics to gorun (metrics.go); nil before Join returns
}

// noAddrPort is the port of the address a worker registers with the
// rendezvous: host:0 says that it listens nowhere (the rendezvous refuses
// an empty address). Workers dial the chief and the servers; nobody dials
// them.
const noAddrPort = "0"

// Join finds this process's place in its parameter-server job (read with
// jobenv.DetectTask through getenv, os.Getenv in a task) and returns once
// every task is up and the addresses of the chief and of every server are
// known.
//
// Under gorun, Slurm, mpirun, MPICH, torchrun style or a GOROVOD_CLUSTER
// spec, the chief and the servers first listen on port 0 of the address
// the data plane of an all-reduce rank would take (GOROVOD_BIND_ADDR,
// else the local end of this host's route to the rendezvous: see
// jobenv.DataPlaneHost); then every task registers its rank, host and
// address with the job's rendezvous (gorun's, or the one the chief serves
// where the launcher's JoinPlan says so, as hvd.Init does; workers
// register host:0, an address that listens nowhere) and reads the peer
// table. Waiting for the others is bounded by the start timeout
// (GOROVOD_START_TIMEOUT, gorun's --start-timeout) and ctx; past it the
// error names the ranks that never registered and their hosts. The chief
// serves the rendezvous until Close.
//
// Under TF_CONFIG (or GOROVOD_CLUSTER in its shape) there is no
// rendezvous: the addresses are the spec's, and the chief and each server
// listen on its listed port on every interface (":port"); Join does not
// wait for the others.
//
// A process that is no task of a PS job, or is the evaluator (which runs
// evaluator.Run), is an error.
func Join(ctx context.Context, getenv func(string) string) (*Job, error) {
	task, ok, err := jobenv.DetectTask(getenv)
	switch {
	case err != nil:
		return nil, fmt.Errorf("ps: reading the launcher's environment: %w", err)
	case !ok:
		return nil, fmt.Errorf("ps: this process is no task of a parameter-server job: start it with gorun --ps N, set %s=N for every rank under another launcher, or give TF_CONFIG \"ps\" tasks",
			jobenv.EnvPSServers)
	case task.Role == jobenv.RoleEvaluator:
		return nil, fmt.Errorf("ps: this process is the evaluator (%s): it joins nothing; run it with evaluator.Run", evaluatorWhy(task))
	}
	j, err := newJob(task)
	if err != nil {
		return nil, err
	}
	if task.ChiefAddr != "" { // TF_CONFIG: the spec fixes the addresses
		err = j.listenFixed(task)
	} else {
		err = j.meet(ctx, task)
	}
	if err != nil {
		j.Close()
		return nil, err
	}
	j.pub = metricpush.New(j.rdv, j.Rank, j.Logger) // without gorun's rendezvous, it drops and counts
	j.Logger.Debug("ps: joined the job", "launcher", task.Plan.Launcher, "chief", j.ChiefAddr, "servers", j.ServerAddrs)
	for _, note := range task.Plan.Notes {
		if j.Role == jobenv.RoleChief {
			j.Logger.Warn("ps: " + note)
		}
	}
	return j, nil
}

// evaluatorWhy says what made this process the evaluator.
func evaluatorWhy(t jobenv.Task) string {
	if t.Plan.Launcher != "" {
		return "its " + t.Plan.Launcher + " task"
	}
	return jobenv.EnvRole + "=" + jobenv.RoleEvaluator
}

// newJob fills a Job from the task, with its logger.
func newJob(t jobenv.Task) (*Job, error) {
	log, err := taskLogger(t)
	if err != nil {
		return nil, err
	}
	return &Job{
		Role: t.Role, Index: t.Index, Workers: t.Workers, Servers: t.Servers, Rank: t.Env.Rank,
		ChiefAddr: t.ChiefAddr, ServerAddrs: t.ServerAddrs,
		Secret: t.Env.Secret, TLS: t.Env.TLS, Logger: log, OpTimeout: t.Env.OpTimeout, Hostname: t.Env.Hostname,
	}, nil
}

// taskLogger is slog.Default() filtered at GOROVOD_LOG_LEVEL, with the
// task's role and index attached.
func taskLogger(t jobenv.Task) (*slog.Logger, error) {
	l := slog.Default()
	if t.Env.LogLevel != "" {
		level, err := t.Env.SlogLevel()
		if err != nil {
			return nil, fmt.Errorf("ps: %w", err)
		}
		l = slog.New(levelHandler{Handler: l.Handler(), min: level})
	}
	return l.With("role", t.Role, "index", t.Index), nil
}

// levelHandler passes on the records at or above min, whatever level the
// handler it wraps is set to.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

// Enabled reports whether level is at least the minimum.
func (h levelHandler) Enabled(_ context.Context, level slog.Level) bool { return level >= h.min }

// WithAttrs keeps the level on the derived handler.
func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(attrs), h.min}
}

// WithGroup keeps the level on the derived handler.
func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(name), h.min}
}

// where names this task in errors: "ps: parameter server 1 (rank 4) on h".
func (j *Job) where() string {
	what := j.Role
	switch j.Role {
	case jobenv.RoleWorker:
		what = fmt.Sprintf("worker %d", j.Index)
	case jobenv.RolePS:
		what = fmt.Sprintf("parameter server %d", j.Index)
	}
	return fmt.Sprintf("ps: %s (rank %d) on %s", what, j.Rank, j.Hostname)
}

// listens reports whether this task accepts connections.
func (j *Job) listens() bool { return j.Role == jobenv.RoleChief || j.Role == jobenv.RolePS }

// listenFixed listens, on the chief and on a server, on the port its
// TF_CONFIG address names, on every interface.
func (j *Job) listenFixed(t jobenv.Task) error {
	if !j.listens() {
		return nil
	}
	addr := t.ChiefAddr
	if j.Role == jobenv.RolePS {
		addr = t.ServerAddrs[j.Index]
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", j.where(), err)
	}
	if j.Listener, err = listen(":" + port); err != nil {
		return fmt.Errorf("%s: cannot listen on the port of its TF_CONFIG address %s: %w", j.where(), addr, err)
	}
	return nil
}

// meet listens (chief and servers), serves the rendezvous where the plan
// says so, registers and reads the peer table, within the start timeout.
func (j *Job) meet(ctx context.Context, t jobenv.Task) error {
	ctx, cancel := context.WithTimeout(ctx, t.Env.StartTimeout)
	defer cancel()
	addr, err := j.listenAuto(t)
	if err != nil {
		return err
	}
	if t.Plan.ServeAddr != "" {
		if err := j.serve(t); err != nil {
			return err
		}
	}
	if j.rdv, err = rendezvous.Dial(ctx, t.Env.RendezvousAddr, t.Env.Secret, rendezvous.WithLogger(j.Logger), rendezvous.WithTLS(t.Env.TLS)); err != nil {
		return fmt.Errorf("%s: joining the rendezvous at %s: %w", j.where(), t.Env.RendezvousAddr, err)
	}
	peers, err := j.register(ctx, addr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("the job did not start within %v: %w", t.Env.StartTimeout, err)
		}
		err = fmt.Errorf("%s: %w", j.where(), err)
		if j.srv != nil { // the ranks still waiting learn why, before Close stops it
			j.srv.AbortAndLinger(err.Error())
		}
		return err
	}
	j.ChiefAddr = peers[0].Addr
	j.ServerAddrs = make([]string, j.Servers)
	for i := range j.ServerAddrs {
		j.ServerAddrs[i] = peers[1+j.Workers+i].Addr
	}
	if t.Plan.Launcher != jobenv.LauncherGorun { // only gorun's rendezvous outlives the start
		j.rdv.Close()
		j.rdv = nil
	}
	return nil
}

// listenAuto listens, on the chief and on a server, on port 0 of the
// address an all-reduce rank's data plane would take, and returns the
// address to register: the listener's, or a worker's host:0.
func (j *Job) listenAuto(t jobenv.Task) (string, error) {
	if !j.listens() {
		host := j.Hostname
		if host == "" {
			host = "localhost"
		}
		return net.JoinHostPort(host, noAddrPort), nil
	}
	host, err := jobenv.DataPlaneHost(t.Env.BindAddr, t.Env.RendezvousAddr, t.Env.LocalSize == t.Env.Size, t.Plan.RouteHints)
	if err != nil {
		return "", fmt.Errorf("%s: %w", j.where(), err)
	}
	if j.Listener, err = listen(net.JoinHostPort(host, "0")); err != nil {
		return "", fmt.Errorf("%s: %w", j.where(), err)
	}
	return j.Listener.Addr().String(), nil
}

// serve starts, on the chief of a job that gorun did not start, the
// rendezvous every task joins, as hvd.Init's rank 0 does.
func (j *Job) serve(t jobenv.Task) error {
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		Addr: t.Plan.ServeAddr, Secret: t.Env.Secret, Size: t.Env.Size, Hosts: t.Plan.Hosts,
		Logger: slog.New(levelHandler{Handler: j.Logger.Handler(), min: slog.LevelWarn}), TLS: t.Env.TLS,
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		return fmt.Errorf("%s (%s) cannot serve the job's rendezvous on %s (set %s to a free port, the same for every rank): %w",
			j.where(), t.Plan.Launcher, t.Plan.ServeAddr, jobenv.EnvRendezvousPort, err)
	}
	j.srv = srv
	return nil
}

// register registers this task at addr and returns the peer table.
func (j *Job) register(ctx context.Context, addr string) ([]rendezvous.Peer, error) {
	if err := j.rdv.Register(ctx, j.Rank, j.Hostname, addr); err != nil {
		return nil, err
	}
	peers, err := j.rdv.PeerTable(ctx)
	if err != nil {
		return nil, err
	}
	if len(peers) != 1+j.Workers+j.Servers {
		return nil, fmt.Errorf("the rendezvous has %d ranks, but a chief, %d workers and %d servers make %d", len(peers), j.Workers, j.Servers, 1+j.Workers+j.Servers)
	}
	return peers, nil
}

// Close ends this task's part in the job's start: it closes the
// rendezvous client (kept under gorun), stops the rendezvous the chief
// serves, and closes Listener unless it is in use: once anything has
// called its Accept (the coordinator, a server), that owner closes it.
// It is idempotent.
func (j *Job) Close() error {
	var errs []error
	j.pub.Close() // the last points, before the rendezvous client goes
	if j.rdv != nil {
		errs = append(errs, j.rdv.Close())
		j.rdv = nil
	}
	if j.srv != nil {
		j.srv.Stop()
		j.srv = nil
	}
	if l, ok := j.Listener.(*listener); ok && !l.used.Load() {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// listener is a Job's Listener: it notes its first Accept, after which
// whoever accepts on it (the coordinator, a server) owns it and Job.Close
// leaves it open.
type listener struct {
	net.Listener
	used atomic.Bool
}

// Accept marks the listener used and accepts the next connection.
func (l *listener) Accept() (net.Conn, error) {
	l.used.Store(true)
	return l.Listener.Accept()
}

// listen listens on addr, as a Job's Listener.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: ln}, nil
}
