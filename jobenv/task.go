package jobenv

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/auth"
)

// This file reads a parameter-server job's roles from the environment:
// GOROVOD_PS_SERVERS under any launcher of ranks, GOROVOD_ROLE for the
// evaluator, and a TF_CONFIG spec with "ps" tasks (DetectTask).

// Roles of the processes of a parameter-server job (Task.Role).
const (
	RoleChief     = "chief"     // rank 0: creates the variables, schedules the steps, ends the job
	RoleWorker    = "worker"    // ranks 1..M: run the steps the chief schedules
	RolePS        = "ps"        // the last N ranks: parameter servers
	RoleEvaluator = "evaluator" // the sidecar evaluator: not a rank
)

// Task is one process of a parameter-server job: its role, its index
// among the tasks of that role, the job's shape, and how it reaches the
// others. The chief is rank 0 (Index 0), worker i is rank 1+i and
// parameter server i is rank 1+Workers+i, under every launcher.
type Task struct {
	Role    string // RoleChief, RoleWorker, RolePS or RoleEvaluator
	Index   int    // among the tasks of its role (the chief's and the evaluator's: 0)
	Workers int    // M, the number of workers (0 for an evaluator that gorun started)
	Servers int    // N, the number of parameter servers (0 for an evaluator that gorun started)
	// Env is this process's place in the job (rank, size, hostname,
	// rendezvous address, secret) and the knobs, as an all-reduce rank's.
	// Under TF_CONFIG it has no RendezvousAddr (the tasks meet at the
	// spec's addresses). An evaluator's holds only the knobs, its host name
	// and the secret where one is given: it is not a rank (Rank 0, Size 1).
	Env Env
	// Plan says how the task joins the job, as for an all-reduce rank: who
	// serves the rendezvous (ServeAddr on rank 0 under a launcher other
	// than gorun). Under TF_CONFIG it names the launcher only.
	Plan JoinPlan
	// ChiefAddr and ServerAddrs are the fixed listen addresses of the chief
	// and of every parameter server under TF_CONFIG ("host:port" as the spec
	// lists them). Empty under gorun, Slurm and the other launchers of
	// ranks, where the tasks publish them through the rendezvous at start.
	ChiefAddr   string
	ServerAddrs []string
}

// DetectTask reads, through getenv (os.Getenv in a process), whether this
// process is a task of a parameter-server job, and which. ok is false (and
// err nil) for an all-reduce job or a process alone: read those with
// Detect. A PS job is
//
//   - GOROVOD_ROLE=evaluator: the evaluator (gorun --evaluator sets it);
//   - GOROVOD_PS_SERVERS=N under any launcher of ranks that Detect reads
//     (gorun, a GOROVOD_CLUSTER spec, mpirun, MPICH, Slurm, torchrun
//     style): of Size ranks, rank 0 is the chief, ranks 1..Size-1-N the
//     workers and the last N the parameter servers; it needs at least N+2
//     ranks;
//   - a TF_CONFIG spec (in TF_CONFIG, or GOROVOD_CLUSTER in its shape)
//     with "ps" tasks: the task's type and index say its role (master is
//     the chief); the spec must have one chief and at least one worker;
//     the chief's and the servers' listed addresses are where they listen
//     (ChiefAddr, ServerAddrs). An "evaluator" task is the evaluator, with
//     or without "ps" tasks.
//
// A malformed PS environment is an error wrapping ErrEnv (the GOROVOD_*
// variables) or ErrLauncher (the launcher's, naming it and what it read).
func DetectTask(getenv func(string) string) (Task, bool, error) {
	host, _ := os.Hostname()
	return detector{getenv: getenv, hostname: host, ppid: os.Getppid()}.task()
}

// task is DetectTask.
func (d detector) task() (Task, bool, error) {
	if role := d.getenv(EnvRole); role != "" {
		t, err := d.evaluatorTask(role)
		return t, err == nil, err
	}
	c, r, ok, err := d.tfSpec()
	switch {
	case err != nil:
		return Task{}, false, d.launcherError(r, err)
	case ok && (len(c.Cluster[TFPS]) > 0 || c.Task.Type == TFEvaluator):
		if s := d.getenv(EnvPSServers); s != "" {
			return Task{}, false, d.launcherError(r, fmt.Errorf(`%s=%s is set, but the spec names the parameter servers itself ("ps" tasks): unset it`, EnvPSServers, clip(s, maxQuoted)))
		}
		t, err := d.tfTask(c, r)
		if err != nil {
			return Task{}, false, d.launcherError(r, err)
		}
		return t, true, nil
	case d.getenv(EnvPSServers) == "":
		return Task{}, false, nil
	}
	env, plan, err := d.detectJob()
	if err != nil {
		return Task{}, false, err
	}
	t, err := rankTask(env, plan, d.getenv(EnvPSServers))
	return t, err == nil, err
}

// evaluatorTask is the evaluator that gorun --evaluator starts
// (GOROVOD_ROLE=evaluator): the knobs, its host and the secret, no rank.
func (d detector) evaluatorTask(role string) (Task, error) {
	if role != RoleEvaluator {
		return Task{}, fmt.Errorf("%w: %s=%q: the only role it sets is %q (the others follow from the rank and %s)",
			ErrEnv, EnvRole, clip(role, maxQuoted), RoleEvaluator, EnvPSServers)
	}
	if d.getenv(EnvRank) != "" {
		return Task{}, fmt.Errorf("%w: %s=%s and %s are both set: the evaluator is not a rank", ErrEnv, EnvRole, role, EnvRank)
	}
	env, _, err := FromEnviron(d.knobsOnly)
	if err != nil {
		return Task{}, err
	}
	if s := d.getenv(EnvSecret); s != "" {
		b, err := hex.DecodeString(s)
		if err != nil || len(b) != auth.SecretSize {
			return Task{}, fmt.Errorf("%w: %s: want %d hexadecimal digits (<%d characters, redacted>)", ErrEnv, EnvSecret, 2*auth.SecretSize, len(s))
		}
		env.Secret = b
	}
	return Task{Role: RoleEvaluator, Env: env}, nil
}

// rankTask maps a job of ranks onto the roles of a PS job of n (the value
// of GOROVOD_PS_SERVERS) parameter servers.
func rankTask(env Env, plan JoinPlan, n string) (Task, error) {
	servers, err := strconv.Atoi(n)
	if err != nil || servers < 1 {
		return Task{}, fmt.Errorf("%w: %s=%q: want the number of parameter servers, at least 1", ErrEnv, EnvPSServers, clip(n, maxQuoted))
	}
	workers := env.Size - 1 - servers
	if workers < 1 {
		return Task{}, fmt.Errorf("%w: %s=%d: %d parameter servers need at least %d processes (a chief, a worker and %d servers), but the job has %d (%s)",
			ErrEnv, EnvPSServers, servers, servers, servers+2, servers, env.Size, launcherName(plan))
	}
	t := Task{Workers: workers, Servers: servers, Env: env, Plan: plan}
	switch {
	case env.Rank == 0:
		t.Role = RoleChief
	case env.Rank <= workers:
		t.Role, t.Index = RoleWorker, env.Rank-1
	default:
		t.Role, t.Index = RolePS, env.Rank-1-workers
	}
	return t, nil
}

// launcherName names plan's launcher for messages.
func launcherName(plan JoinPlan) string {
	if plan.Launcher == "" {
		return "no launcher"
	}
	return plan.Launcher
}

// tfSpec returns the TF_CONFIG-shaped spec that Detect would read: that
// of GOROVOD_CLUSTER when it is the first launcher that matches and holds
// one, or TF_CONFIG's when no other launcher matches first. ok is false
// when the job is none of those; err, with r the reader, when the spec
// cannot be read.
func (d detector) tfSpec() (c TFConfig, r launcherReader, ok bool, err error) {
	if d.getenv(EnvRank) != "" {
		return TFConfig{}, r, false, nil
	}
	for _, r = range launcherReaders() {
		if r.match(d) {
			break
		}
	}
	var data []byte
	switch {
	case !r.match(d):
		return TFConfig{}, r, false, nil
	case r.name == LauncherCluster:
		if data, err = readClusterData(d.getenv(EnvCluster)); err != nil {
			return TFConfig{}, r, false, err
		}
		if !isTFConfigShape(data) {
			return TFConfig{}, r, false, nil
		}
	case r.name == LauncherTFConfig:
		data = []byte(d.getenv(EnvTFConfig))
	default:
		return TFConfig{}, r, false, nil
	}
	c, err = ParseTFConfig(data)
	return c, r, err == nil, err
}

// tfTask is the task of a TF_CONFIG spec with "ps" tasks, or its
// evaluator: the chief is rank 0, the workers follow, the servers last.
func (d detector) tfTask(c TFConfig, r launcherReader) (Task, error) {
	chiefs := append(append([]string(nil), c.Cluster[TFChief]...), c.Cluster[TFMaster]...)
	workers, servers := c.Cluster[TFWorker], c.Cluster[TFPS]
	if len(servers) > 0 {
		switch {
		case len(chiefs) == 0:
			return Task{}, fmt.Errorf(`the cluster has "ps" tasks (%d) but no "chief": a parameter-server job needs one chief task, which creates the variables and schedules the steps`, len(servers))
		case len(workers) == 0:
			return Task{}, fmt.Errorf(`the cluster has "ps" tasks (%d) but no "worker" task: a parameter-server job needs at least one worker to run the steps`, len(servers))
		}
	}
	env, _, err := FromEnviron(d.knobsOnly)
	if err != nil {
		return Task{}, err
	}
	plan := JoinPlan{Launcher: r.name, Vars: d.setVars(r.vars)}
	t := Task{Workers: len(workers), Servers: len(servers), ServerAddrs: servers, Plan: plan}
	if len(chiefs) > 0 {
		t.ChiefAddr = chiefs[0]
	}
	addrs := append(append(append([]string(nil), chiefs...), workers...), servers...)
	rank := 0
	switch c.Task.Type {
	case TFChief, TFMaster:
		t.Role = RoleChief
	case TFWorker:
		t.Role, t.Index = RoleWorker, c.Task.Index
		rank = len(chiefs) + c.Task.Index
	case TFPS:
		t.Role, t.Index = RolePS, c.Task.Index
		rank = len(chiefs) + len(workers) + c.Task.Index
	case TFEvaluator:
		t.Role, t.Index = RoleEvaluator, c.Task.Index
		env.Hostname, _, _ = net.SplitHostPort(c.Cluster[TFEvaluator][c.Task.Index])
		t.Env = env
		return t, nil
	}
	hostOf := make([]string, len(addrs))
	for i, a := range addrs {
		hostOf[i], _, _ = net.SplitHostPort(a)
	}
	p := slotPlacement(hostOf, rank)
	env.Rank, env.Size, env.Hostname = p.rank, p.size, p.host
	env.LocalRank, env.LocalSize, env.CrossRank, env.CrossSize = p.localRank, p.localSize, p.crossRank, p.crossSize
	prefix := "tfconfig:"
	if r.name == LauncherCluster {
		prefix = "cluster:"
	}
	secret, note, err := d.secret(r.name, prefix+"ps:"+strings.Join(addrs, ","))
	if err != nil {
		return Task{}, err
	}
	env.Secret = secret
	if note != "" {
		plan.Notes = append(plan.Notes, note)
	}
	plan.Hosts = hostOf
	t.Env, t.Plan = env, plan
	return t, nil
}

// psJobError is Detect's error for a process whose environment is that of
// a parameter-server job (DetectTask): hvd.Init joins all-reduce jobs
// only. It returns nil when the environment is no PS job.
func (d detector) psJobError() error {
	if d.getenv(EnvRole) == "" && d.getenv(EnvPSServers) == "" {
		return nil
	}
	t, _, err := d.task()
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s=%s makes this process the evaluator", EnvRole, d.getenv(EnvRole))
	if t.Role != RoleEvaluator {
		what = fmt.Sprintf("%s=%d makes this process (rank %d of %d) the %s", EnvPSServers, t.Servers, t.Env.Rank, t.Env.Size, taskName(t))
	}
	return fmt.Errorf("%w: %s of a parameter-server job: run it with ps.Run (or ps.Join; the evaluator with evaluator.Run), not with an all-reduce job's Init", ErrPSJob, what)
}

// taskName is "chief", "worker 2" or "parameter server 1".
func taskName(t Task) string {
	switch t.Role {
	case RoleWorker:
		return fmt.Sprintf("worker %d", t.Index)
	case RolePS:
		return fmt.Sprintf("parameter server %d", t.Index)
	}
	return t.Role
}
