package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gorovod/gorovod/kernels"
)

// hvdSection is the part of every build report that lists the launchers
// hvd.Init joins, which no probe changes.
const hvdSection = `
Launchers whose ranks hvd.Init joins:
    (a property of the hvd library that a program links, not of gorun)
    [X] gorun (GOROVOD_RANK, GOROVOD_SIZE and the rest of its contract)
    [X] by hand, one command per process (a GOROVOD_CLUSTER spec)
    [X] Open MPI mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)
    [X] MPICH or Intel MPI mpiexec (PMI_RANK, PMI_SIZE)
    [X] Slurm srun (SLURM_PROCID, SLURM_STEP_ID)
    [X] torchrun style, Kubernetes too (RANK, WORLD_SIZE, MASTER_ADDR)
    [X] TensorFlow style, Kubeflow's TFJob too (TF_CONFIG: a chief and workers, no ps)
`

// kernelsSection is the kernels part of a build report; SUM stands for
// kernels.SumKernels and SCALE for kernels.ScaleKernels, which depend on
// the build.
const kernelsSection = `
Kernels:
    [X] CPU reductions (sum, min, max, prod, avg of float32, float64, float16, bfloat16, int32, int64, uint8)
    [X] float32 and float64 sums in SUM
    [X] float32 and float64 scaling (avg, pre- and postscale) in SCALE
`

// TestCheckBuildReport: the report gathered from given probes, formatted,
// is exactly the expected text.
func TestCheckBuildReport(t *testing.T) {
	found := func(file string) (string, error) { return "/usr/bin/" + file, nil }
	notFound := func(file string) (string, error) { return "", &exec.Error{Name: file, Err: exec.ErrNotFound} }
	gpus := func() []feature {
		return []feature{
			{ok: true, name: "CUDA", note: "driver supports CUDA 12.4"},
			{ok: true, name: "GPU 0", note: "NVIDIA H100 80GB HBM3"},
			{ok: true, name: "GPU 1", note: "NVIDIA H100 80GB HBM3"},
		}
	}
	noGPU := func() []feature {
		return []feature{{name: "CUDA", note: "not in this build: build with -tags cuda, cgo and the CUDA toolkit"}}
	}
	release := &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "CGO_ENABLED", Value: "1"},
		{Key: "vcs.revision", Value: "0166099a1b2c3d4e5f60718293a4b5c6d7e8f901"},
		{Key: "vcs.time", Value: "2026-11-24T10:49:01Z"},
	}}
	static := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "0"}}}

	cases := []struct {
		name   string
		probes buildProbes
		want   string
	}{
		{
			name:   "everything",
			probes: buildProbes{info: release, lookPath: found, sharedMemory: func() error { return nil }, cuda: gpus},
			want: `gorun v0.3.0 (commit 0166099a1b2c, 2026-11-24T10:49:01Z)
built with go1.26.0 for linux/amd64, CGO_ENABLED=1

Transports:
    [X] TCP
    [X] shared memory

GPU:
    [X] CUDA (driver supports CUDA 12.4)
    [X] GPU 0 (NVIDIA H100 80GB HBM3)
    [X] GPU 1 (NVIDIA H100 80GB HBM3)
` + kernelsSection + `
Launchers that gorun starts ranks with:
    [X] local
    [X] ssh (/usr/bin/ssh)
    [X] srun (/usr/bin/srun)
` + hvdSection,
		},
		{
			name:   "no ssh, no srun, no build information",
			probes: buildProbes{info: nil, lookPath: notFound, sharedMemory: func() error { return nil }, cuda: noGPU},
			want: `gorun (devel)
built with go1.26.0 for linux/amd64, CGO_ENABLED unknown

Transports:
    [X] TCP
    [X] shared memory

GPU:
    [ ] CUDA (not in this build: build with -tags cuda, cgo and the CUDA toolkit)
` + kernelsSection + `
Launchers that gorun starts ranks with:
    [X] local
    [ ] ssh (no ssh on PATH)
    [ ] srun (no srun on PATH)
` + hvdSection,
		},
		{
			name: "no shared memory, srun not runnable",
			probes: buildProbes{
				info: static,
				lookPath: func(file string) (string, error) {
					if file == "srun" {
						return "", &exec.Error{Name: file, Err: os.ErrPermission}
					}
					return "/usr/local/bin/" + file, nil
				},
				sharedMemory: func() error {
					return errors.New("tcptransport: shared memory: shmring: fallocate: no space left on device")
				},
				cuda: noGPU,
			},
			want: `gorun (devel)
built with go1.26.0 for linux/amd64, CGO_ENABLED=0

Transports:
    [X] TCP
    [ ] shared memory (tcptransport: shared memory: shmring: fallocate: no space left on device; ranks on one host use TCP)

GPU:
    [ ] CUDA (not in this build: build with -tags cuda, cgo and the CUDA toolkit)
` + kernelsSection + `
Launchers that gorun starts ranks with:
    [X] local
    [X] ssh (/usr/local/bin/ssh)
    [ ] srun (exec: "srun": permission denied)
` + hvdSection,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := gatherBuild(c.probes)
			if r.goVersion != runtime.Version() || r.platform != runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("toolchain %s %s, want %s %s/%s", r.goVersion, r.platform, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			}
			r.goVersion, r.platform = "go1.26.0", "linux/amd64" // the same text on every machine
			want := strings.ReplaceAll(strings.ReplaceAll(c.want, "SUM", kernels.SumKernels), "SCALE", kernels.ScaleKernels)
			if got := r.format(); got != want {
				t.Errorf("report:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestCheckBuildGorun: gorun --check-build, with or without a program,
// prints the report of this build and exits 0 without starting a rank.
func TestCheckBuildGorun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "rank-ran")
	for _, args := range [][]string{
		{"--check-build"},
		{"--check-build", "-np", "2", "touch", marker},
	} {
		start := time.Now()
		cmd, stdout, stderr := gorun(t, args...)
		r := finish(t, cmd, stdout, stderr, start, 20*time.Second)
		if r.code != 0 {
			t.Errorf("gorun %q: exit status %d, want 0; stderr:\n%s", args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "gorun ") {
			t.Errorf("gorun %q: the report does not start with %q:\n%s", args, "gorun ", r.stdout)
		}
		for _, line := range []string{
			"\n    [X] TCP\n",
			"\n    [ ] CUDA (not in this build",
			"\n    [X] local\n",
			"\n    [X] Open MPI mpirun (",
		} {
			if !strings.Contains(r.stdout, line) {
				t.Errorf("gorun %q: no line %q in the report:\n%s", args, strings.TrimSpace(line), r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "\n    [X] shared memory\n") && !strings.Contains(r.stdout, "\n    [ ] shared memory (") {
			t.Errorf("gorun %q: no shared memory line in the report:\n%s", args, r.stdout)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gorun --check-build ran the program (%s: %v)", marker, err)
	}
}
