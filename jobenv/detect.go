package jobenv

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"
)

// Launcher names, as JoinPlan.Launcher reports them.
const (
	LauncherNone     = ""         // no launcher: a job of one rank
	LauncherGorun    = "gorun"    // the GOROVOD_* contract
	LauncherCluster  = "cluster"  // a GOROVOD_CLUSTER spec, one command per process
	LauncherOpenMPI  = "openmpi"  // Open MPI's mpirun (OMPI_COMM_WORLD_*)
	LauncherMPICH    = "mpich"    // MPICH's Hydra mpiexec and Intel MPI (PMI_RANK, PMI_SIZE)
	LauncherSlurm    = "slurm"    // a task of a Slurm job step (srun)
	LauncherTorchrun = "torchrun" // torchrun style: RANK, WORLD_SIZE, MASTER_ADDR (Kubernetes too)
	LauncherTFConfig = "tfconfig" // TensorFlow's TF_CONFIG (Kubeflow's TFJob), one command per process
)

// Derived rendezvous ports fall in [derivedPortBase, derivedPortBase+derivedPorts):
// below Linux's ephemeral range, so a derived port never collides with a
// connection's local port.
const (
	derivedPortBase = 20000
	derivedPorts    = 12000
)

// JoinPlan says how a process that gorun did not start joins its job: who
// serves the rendezvous, and what is left to work out once every rank has
// registered. Detect makes it; hvd carries it out.
type JoinPlan struct {
	// Launcher names what started the process (one of the Launcher constants).
	Launcher string
	// Vars lists the launcher's variables that were read, "NAME=value", for
	// messages.
	Vars []string
	// ServeAddr, on the rank that serves the rendezvous (rank 0), is the
	// address it listens on (":port"); "" on every other rank and under gorun.
	ServeAddr string
	// Hosts is the planned host of each rank when the launcher tells (it
	// names the hosts of missing ranks); nil otherwise.
	Hosts []string
	// RouteHints lists the job's other hosts: the data plane listens on the
	// address this host uses to reach them when the rendezvous is local.
	RouteHints []string
	// DeriveTopology says that the launcher does not tell the local and
	// cross ranks: they are worked out from the hosts the ranks register.
	DeriveTopology bool
	// Notes are warnings for rank 0 to log once (an unauthenticated job).
	Notes []string
}

// Detect works out which launcher started this process and how it joins
// its job, from its environment (getenv is os.Getenv in a worker). The
// GOROVOD_* contract that gorun writes comes first; then, in order, a
// GOROVOD_CLUSTER spec (in its own shape or TF_CONFIG's), Open MPI,
// MPICH/Hydra, a Slurm job step, the torchrun-style RANK/WORLD_SIZE
// variables and last TF_CONFIG, which a shell may have exported long before
// the launcher ran. With none of them the result is a job of one rank.
//
// An environment of a parameter-server job (see DetectTask:
// GOROVOD_PS_SERVERS, GOROVOD_ROLE, a TF_CONFIG spec with "ps" tasks) is
// an error wrapping ErrPSJob that names this process's task: its programs
// run with package ps, not with an all-reduce Init.
//
// A launcher whose variables say that the job has more than one rank and
// that cannot be joined (a variable missing or malformed, no way to find
// rank 0, an unreadable secret) is an error wrapping ErrLauncher that names
// the launcher and the variables it read: never a silent one-rank job.
func Detect(getenv func(string) string) (Env, JoinPlan, error) {
	host, _ := os.Hostname()
	return detector{getenv: getenv, hostname: host, ppid: os.Getppid()}.detect()
}

// detector holds what Detect reads, so tests can fake the process's host
// name and parent.
type detector struct {
	getenv   func(string) string
	hostname string // os.Hostname
	ppid     int    // os.Getppid: the launcher's local daemon under Hydra
}

// placement is what a launcher reader learns about this process.
type placement struct {
	rank, size           int
	localRank, localSize int // -1 when the launcher does not tell
	crossRank, crossSize int // -1 when the launcher does not tell
	host                 string
	rdvHost              string   // where rank 0 serves the rendezvous; "" unknown
	rdvPort              int      // 0: derive from jobID
	jobID                string   // the same on every rank of the job, and only of this job
	hosts                []string // planned host of each rank, or nil
	nodes                []string // the job's distinct hosts, or nil
}

// launcherReader reads one launcher's variables.
type launcherReader struct {
	name  string
	vars  []string // every variable it may read, for messages
	match func(d detector) bool
	read  func(d detector) (placement, error)
	// sizeVar, when set outside a match, says how many ranks the launcher
	// meant to start; more than one is an error, and hint says what to do.
	sizeVar, hint string
}

// launcherReaders lists the launchers in the order Detect tries them: MPI
// launchers before Slurm, whose variables they may inherit from an
// allocation; TF_CONFIG, which names no launcher, last.
func launcherReaders() []launcherReader {
	return []launcherReader{clusterReader(), openMPIReader(), mpichReader(), slurmReader(), torchrunReader(), tfConfigReader()}
}

// detect is Detect: the job of ranks that detectJob reads, unless the
// environment is that of a parameter-server job (psJobError).
func (d detector) detect() (Env, JoinPlan, error) {
	if err := d.psJobError(); err != nil {
		return Env{}, JoinPlan{}, err
	}
	return d.detectJob()
}

// detectJob reads the job of ranks that the launcher started.
func (d detector) detectJob() (Env, JoinPlan, error) {
	if d.getenv(EnvRank) != "" {
		env, _, err := FromEnviron(d.getenv)
		return env, JoinPlan{Launcher: LauncherGorun}, err
	}
	env, _, err := FromEnviron(d.knobsOnly)
	if err != nil {
		return Env{}, JoinPlan{}, err
	}
	for _, r := range launcherReaders() {
		if !r.match(d) {
			continue
		}
		p, err := r.read(d)
		if err == nil {
			env, plan, jerr := d.join(env, r, p)
			if jerr == nil {
				return env, plan, nil
			}
			err = jerr
		}
		return Env{}, JoinPlan{}, d.launcherError(r, err)
	}
	if err := d.checkAlone(); err != nil {
		return Env{}, JoinPlan{}, err
	}
	return env, JoinPlan{}, nil
}

// knobsOnly is getenv without the variables that only a launcher gives
// meaning to, so FromEnviron reads just the knobs.
func (d detector) knobsOnly(name string) string {
	if name == EnvRendezvousAddr || name == EnvSecret {
		return ""
	}
	return d.getenv(name)
}

// checkAlone fails when no launcher matched but some variable says that
// this process was meant to be one of several ranks.
func (d detector) checkAlone() error {
	for _, r := range launcherReaders() {
		if r.sizeVar == "" {
			continue
		}
		if n, err := strconv.Atoi(d.getenv(r.sizeVar)); err == nil && n > 1 {
			return d.launcherError(r, fmt.Errorf("%s=%d says the job has %d ranks, but this process is not one of them (%s)", r.sizeVar, n, n, r.hint))
		}
	}
	for _, name := range []string{EnvRendezvousAddr, EnvSecret, EnvSecretFile, EnvRendezvousPort, EnvClusterIndex} {
		if d.getenv(name) != "" {
			return fmt.Errorf("%w: %s is set, but no launcher gives this process a rank (%s, a Slurm step, mpirun, RANK and WORLD_SIZE, %s or %s)",
				ErrLauncher, name, EnvRank, EnvCluster, EnvTFConfig)
		}
	}
	return nil
}

// launcherError wraps err with ErrLauncher, the launcher's name and the
// variables it read.
func (d detector) launcherError(r launcherReader, err error) error {
	return fmt.Errorf("%w: %s (%s): %w", ErrLauncher, r.name, strings.Join(d.setVars(r.vars), " "), err)
}

// setVars returns "NAME=value" for each of names that is set.
func (d detector) setVars(names []string) []string {
	var kv []string
	for _, n := range names {
		if v := d.getenv(n); v != "" {
			kv = append(kv, n+"="+clip(v, maxQuoted))
		}
	}
	if len(kv) == 0 {
		kv = append(kv, "none of "+strings.Join(names, ", ")+" set")
	}
	return kv
}

// join turns a launcher's placement into the worker environment and the
// plan: identity, rendezvous address, who serves it, and the secret.
func (d detector) join(env Env, r launcherReader, p placement) (Env, JoinPlan, error) {
	plan := JoinPlan{Launcher: r.name, Vars: d.setVars(r.vars), Hosts: p.hosts}
	env.Rank, env.Size, env.Hostname = p.rank, p.size, p.host
	env.LocalRank, env.LocalSize = 0, 1
	env.CrossRank, env.CrossSize = 0, 1
	switch {
	case p.size == 1:
	case p.localRank < 0 || p.crossRank < 0:
		plan.DeriveTopology = true
	}
	if p.localRank >= 0 {
		env.LocalRank, env.LocalSize = p.localRank, p.localSize
	}
	if p.crossRank >= 0 {
		env.CrossRank, env.CrossSize = p.crossRank, p.crossSize
	}
	if p.size > 1 {
		if err := d.rendezvous(&env, &plan, p); err != nil {
			return Env{}, JoinPlan{}, err
		}
	}
	if err := env.Validate(); err != nil {
		return Env{}, JoinPlan{}, err
	}
	return env, plan, nil
}

// rendezvous sets where the job's rendezvous is (GOROVOD_RENDEZVOUS_ADDR
// if set, else rank 0's host at GOROVOD_RENDEZVOUS_PORT, the launcher's
// port or one derived from the job id), who serves it, and the secret.
func (d detector) rendezvous(env *Env, plan *JoinPlan, p placement) error {
	addr := d.getenv(EnvRendezvousAddr)
	if addr == "" {
		if p.rdvHost == "" {
			return fmt.Errorf("the ranks run on several hosts and nothing says where rank 0 is: set %s=host:port (rank 0's host and a free port) for every rank (with mpirun: -x %s=...)",
				EnvRendezvousAddr, EnvRendezvousAddr)
		}
		port, err := d.port(p)
		if err != nil {
			return err
		}
		addr = net.JoinHostPort(p.rdvHost, strconv.Itoa(port))
		if p.jobID == "" {
			p.jobID = addr
		}
	} else if !isHostPort(addr) {
		return fmt.Errorf("%s=%q: want host:port", EnvRendezvousAddr, clip(addr, maxQuoted))
	} else if p.jobID == "" {
		p.jobID = addr
	}
	env.RendezvousAddr = addr
	if p.rank == 0 {
		_, port, _ := net.SplitHostPort(addr)
		plan.ServeAddr = ":" + port
	}
	for _, n := range p.nodes {
		if n != p.host {
			plan.RouteHints = append(plan.RouteHints, n)
		}
	}
	secret, note, err := d.secret(plan.Launcher, p.jobID)
	if err != nil {
		return err
	}
	env.Secret = secret
	if note != "" {
		plan.Notes = append(plan.Notes, note)
	}
	return nil
}

// port returns GOROVOD_RENDEZVOUS_PORT, else the launcher's port, else one
// derived from the job id.
func (d detector) port(p placement) (int, error) {
	if s := d.getenv(EnvRendezvousPort); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n >= 1<<16 {
			return 0, fmt.Errorf("%s=%q: want a port number in 1..65535", EnvRendezvousPort, clip(s, maxQuoted))
		}
		return n, nil
	}
	if p.rdvPort > 0 {
		return p.rdvPort, nil
	}
	if p.jobID == "" {
		return 0, fmt.Errorf("the launcher names no job to derive a rendezvous port from: set %s", EnvRendezvousPort)
	}
	return DerivedPort(p.jobID), nil
}

// DerivedPort is the rendezvous port of a job whose launcher gives none: a
// hash of the job id into [20000, 32000), below Linux's ephemeral ports.
// Set GOROVOD_RENDEZVOUS_PORT where that port is taken.
func DerivedPort(jobID string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return derivedPortBase + int(h.Sum32()%derivedPorts)
}

// intVars reads decimal integers, naming the first variable that is
// missing or malformed.
func (d detector) intVars(names ...string) ([]int, error) {
	out := make([]int, len(names))
	for i, name := range names {
		s := d.getenv(name)
		if s == "" {
			return nil, fmt.Errorf("%s is not set", name)
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a non-negative integer", name, clip(s, maxQuoted))
		}
		out[i] = n
	}
	return out, nil
}

// optionalInts reads a group of decimal integers that are set together or
// not at all: ok is false when none is set.
func (d detector) optionalInts(names ...string) (vals []int, ok bool, err error) {
	for _, name := range names {
		if d.getenv(name) != "" {
			vals, err = d.intVars(names...)
			return vals, err == nil, err
		}
	}
	return nil, false, nil
}

// checkRanks checks rank < size and, when known, local rank < local size ≤ size.
func checkRanks(p placement) error {
	switch {
	case p.size < 1:
		return errors.New("the job size is 0")
	case p.rank >= p.size:
		return fmt.Errorf("rank %d is not below the job size %d", p.rank, p.size)
	case p.localRank >= 0 && (p.localSize > p.size || p.localRank >= p.localSize):
		return fmt.Errorf("local rank %d of %d does not fit a job of %d ranks", p.localRank, p.localSize, p.size)
	}
	return nil
}
