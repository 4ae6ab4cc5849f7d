package main

import (
	"errors"
	"io"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/gorovod/gorovod/collective/tcptransport"
	"github.com/gorovod/gorovod/kernels"
)

// checkBuild prints what this build of gorun supports (gorun
// --check-build), in the manner of horovodrun --check-build: its version
// and toolchain, the transports (shared memory probed on this machine), CUDA,
// the CPU kernels, and the launchers. It starts no rank.
func checkBuild(w io.Writer) error {
	info, _ := debug.ReadBuildInfo()
	r := gatherBuild(buildProbes{
		info:         info,
		lookPath:     exec.LookPath,
		sharedMemory: tcptransport.SharedMemoryCheck,
		cuda:         cudaFeatures,
	})
	_, err := io.WriteString(w, r.format())
	return err
}

// feature is one line of the build report: a capability, whether this
// build on this machine has it, and a note (why not, or which one).
type feature struct {
	ok   bool
	name string
	note string // printed in parentheses after the name; "" for none
}

// buildReport is what gorun --check-build prints.
type buildReport struct {
	version    string    // gorun's version (versionOf)
	goVersion  string    // the Go release that built gorun
	platform   string    // GOOS/GOARCH
	cgo        string    // CGO_ENABLED as the build recorded it; "" unknown
	transports []feature // the data plane's paths between ranks
	gpu        []feature // CUDA and the visible devices
	kernels    []feature // the CPU reductions
	spawners   []feature // how gorun starts ranks
	joiners    []feature // the launchers whose ranks hvd.Init joins
}

// buildProbes are what gatherBuild asks about the build and the machine.
type buildProbes struct {
	info         *debug.BuildInfo                  // the binary's build information; nil if unknown
	lookPath     func(file string) (string, error) // exec.LookPath
	sharedMemory func() error                      // tcptransport.SharedMemoryCheck
	cuda         func() []feature                  // cudaFeatures
}

// gatherBuild collects the build report from the probes.
func gatherBuild(p buildProbes) buildReport {
	r := buildReport{
		version:   versionOf(p.info),
		goVersion: runtime.Version(),
		platform:  runtime.GOOS + "/" + runtime.GOARCH,
		cgo:       buildSetting(p.info, "CGO_ENABLED"),
		gpu:       p.cuda(),
		joiners:   hvdLaunchers(),
	}
	shm := feature{ok: true, name: "shared memory"}
	if err := p.sharedMemory(); err != nil {
		// Links to ranks on this host then stay on TCP (see package
		// tcptransport, "Shared memory between ranks on one host").
		shm = feature{name: "shared memory", note: err.Error() + "; ranks on one host use TCP"}
	}
	r.transports = []feature{{ok: true, name: "TCP"}, shm}
	r.kernels = []feature{
		{ok: true, name: "CPU reductions", note: cpuReductions()},
		{ok: true, name: "float32 and float64 sums in " + kernels.SumKernels},
		{ok: true, name: "float32 and float64 scaling (avg, pre- and postscale) in " + kernels.ScaleKernels},
	}
	r.spawners = []feature{{ok: true, name: "local"}, onPath(p.lookPath, "ssh"), onPath(p.lookPath, "srun")}
	return r
}

// buildSetting returns the value of a build setting (such as CGO_ENABLED)
// that info records, or "".
func buildSetting(info *debug.BuildInfo, key string) string {
	if info == nil {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// cpuReductions lists the operators and element types of the CPU
// reductions in package kernels.
func cpuReductions() string {
	ops := make([]string, len(kernels.Ops))
	for i, o := range kernels.Ops {
		ops[i] = o.String()
	}
	types := make([]string, len(kernels.DTypes))
	for i, d := range kernels.DTypes {
		types[i] = d.String()
	}
	return strings.Join(ops, ", ") + " of " + strings.Join(types, ", ")
}

// onPath reports whether the program that a launcher runs (ssh, srun) is
// on PATH, and where.
func onPath(lookPath func(string) (string, error), program string) feature {
	path, err := lookPath(program)
	switch {
	case err == nil:
		return feature{ok: true, name: program, note: path}
	case errors.Is(err, exec.ErrNotFound):
		return feature{name: program, note: "no " + program + " on PATH"}
	}
	return feature{name: program, note: err.Error()}
}

// hvdLaunchers lists the launchers whose ranks hvd.Init joins, in the order
// jobenv.Detect tries them, each with the variables it is known by.
func hvdLaunchers() []feature {
	return []feature{
		{ok: true, name: "gorun", note: "GOROVOD_RANK, GOROVOD_SIZE and the rest of its contract"},
		{ok: true, name: "by hand, one command per process", note: "a GOROVOD_CLUSTER spec"},
		{ok: true, name: "Open MPI mpirun", note: "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE"},
		{ok: true, name: "MPICH or Intel MPI mpiexec", note: "PMI_RANK, PMI_SIZE"},
		{ok: true, name: "Slurm srun", note: "SLURM_PROCID, SLURM_STEP_ID"},
		{ok: true, name: "torchrun style, Kubernetes too", note: "RANK, WORLD_SIZE, MASTER_ADDR"},
		{ok: true, name: "TensorFlow style, Kubeflow's TFJob too", note: "TF_CONFIG: a chief and workers, no ps"},
	}
}

// format renders the report: a header, then one section per kind of
// feature, one feature per line marked [X] (there) or [ ] (not there).
func (r buildReport) format() string {
	var b strings.Builder
	b.WriteString("gorun " + r.version + "\n")
	cgo := "CGO_ENABLED unknown"
	if r.cgo != "" {
		cgo = "CGO_ENABLED=" + r.cgo
	}
	b.WriteString("built with " + r.goVersion + " for " + r.platform + ", " + cgo + "\n")
	sections := []struct {
		title, note string
		features    []feature
	}{
		{"Transports", "", r.transports},
		{"GPU", "", r.gpu},
		{"Kernels", "", r.kernels},
		{"Launchers that gorun starts ranks with", "", r.spawners},
		{"Launchers whose ranks hvd.Init joins", "a property of the hvd library that a program links, not of gorun", r.joiners},
	}
	for _, s := range sections {
		b.WriteString("\n" + s.title + ":\n")
		if s.note != "" {
			b.WriteString("    (" + s.note + ")\n")
		}
		for _, f := range s.features {
			b.WriteString("    " + f.line() + "\n")
		}
	}
	return b.String()
}

// line is f as a line of the report: "[X] name (note)".
func (f feature) line() string {
	mark := "[ ]"
	if f.ok {
		mark = "[X]"
	}
	s := mark + " " + f.name
	if f.note != "" {
		s += " (" + f.note + ")"
	}
	return s
}
