package runner

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/gorovod/gorovod/jobenv"
)

// Choices of Config.BindTo (gorun --bind-to).
const (
	BindNone = "none" // the kernel places ranks (also "")
	BindCore = "core" // each rank on its own block of its host's processors
)

// ThreadVars are the variables that set a rank's thread counts: Go's
// processors, OpenMP's and OpenBLAS's threads. Unless the rank's
// environment already sets one, every rank gets each of them set to its
// share of its host's processors (see CPUShare), as torchrun sets
// OMP_NUM_THREADS, so that ranks sharing a host do not oversubscribe it;
// GOMAXPROCS is at least 2 where the host has 2 and the rank is not bound
// (see CPUShare.goThreads). cpuPrelude applies the same rule in shell.
var ThreadVars = []string{"GOMAXPROCS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}

// CPUShare is a rank's share of the processors of its host: it is rank
// Index of the Of ranks there. The host's processors are those gorun's
// ranks may run on there (the affinity mask: a cgroup or taskset narrows
// it), n of them. Each rank's threads default to n ÷ Of (at least 1);
// with Bind, the rank runs on processors [Index·n/Of, (Index+1)·n/Of) of
// the sorted list, a contiguous block, and its threads default to the
// block's size. With more ranks than processors, ranks share processors
// evenly, one each. Of = 0 means no share: no defaults, no binding.
type CPUShare struct {
	Index, Of int
	Bind      bool
}

// block returns the indexes [lo, hi) of this share's processors among n.
func (s CPUShare) block(n int) (lo, hi int) {
	lo, hi = s.Index*n/s.Of, (s.Index+1)*n/s.Of
	if hi == lo {
		hi = lo + 1
	}
	return lo, hi
}

// threads is the thread count of this share of n processors.
func (s CPUShare) threads(n int) int {
	if s.Bind {
		lo, hi := s.block(n)
		return hi - lo
	}
	return max(1, n/s.Of)
}

// goThreads is the GOMAXPROCS default of this share of n processors:
// jobenv.GoMaxProcs of its thread count, unless the rank is bound to its
// block, whose size it then is.
func (s CPUShare) goThreads(n int) int {
	t := s.threads(n)
	if s.Bind {
		return t
	}
	return jobenv.GoMaxProcs(t, n)
}

// threadDefaults returns NAME=value for each of ThreadVars that set
// reports unset, for a rank with this share of n processors: goThreads
// for GOMAXPROCS, threads for the others.
func (s CPUShare) threadDefaults(n int, set func(name string) bool) []string {
	if s.Of <= 0 || n <= 0 {
		return nil
	}
	t := strconv.Itoa(s.threads(n))
	var env []string
	for _, name := range ThreadVars {
		if set(name) {
			continue
		}
		v := t
		if name == "GOMAXPROCS" {
			v = strconv.Itoa(s.goThreads(n))
		}
		env = append(env, name+"="+v)
	}
	return env
}

// cpuMask is a CPU affinity mask of sched_getaffinity(2): bit i is
// processor i; 8192 processors.
type cpuMask [128]uint64

// threadAffinity returns the affinity mask of the calling thread.
func threadAffinity() (cpuMask, error) {
	var m cpuMask
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return m, os.NewSyscallError("sched_getaffinity", e)
	}
	return m, nil
}

// setThreadAffinity sets the affinity mask of the calling thread.
func setThreadAffinity(m cpuMask) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return os.NewSyscallError("sched_setaffinity", e)
	}
	return nil
}

// cpus lists the processors of m in order.
func (m *cpuMask) cpus() []int {
	var out []int
	for i := range len(m) * 64 {
		if m[i/64]&(1<<(i%64)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// maskOf is the mask of the processors cpus.
func maskOf(cpus []int) cpuMask {
	var m cpuMask
	for _, c := range cpus {
		m[c/64] |= 1 << (c % 64)
	}
	return m
}

// formatCPUs writes processors as taskset's list does: 0-3,8.
func formatCPUs(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		} else {
			fmt.Fprintf(&b, "%d", cpus[i])
		}
		i = j + 1
	}
	return b.String()
}

// startShared starts a local rank with its share of this host's
// processors: the thread defaults join its environment (where neither
// gorun's environment nor the command sets them), and with Bind it starts
// on its block of processors. It starts cmd from a thread locked for the
// purpose (see startLocked) whose affinity it narrows to the block for the
// fork, which the child inherits, and then restores.
func startShared(cmd *exec.Cmd, share CPUShare) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if share.Of <= 0 {
		return cmd.Start()
	}
	mask, err := threadAffinity()
	if err != nil {
		return err
	}
	cpus := mask.cpus()
	cmd.Env = append(cmd.Env, share.threadDefaults(len(cpus), func(name string) bool {
		_, set := sshLookupEnv(cmd.Env, name)
		return set
	})...)
	if !share.Bind || len(cpus) == 0 {
		return cmd.Start()
	}
	lo, hi := share.block(len(cpus))
	if err := setThreadAffinity(maskOf(cpus[lo:hi])); err != nil {
		return err
	}
	err = cmd.Start()
	// Restoring the mask read above cannot fail (its processors are
	// online: the thread runs on one); were it to, the thread would only
	// run gorun's goroutines on fewer processors.
	_ = setThreadAffinity(mask)
	return err
}

// cpuPrelude is the script that /bin/sh runs before a rank started over
// ssh or srun, with positional parameters INDEX OF BIND ARGV...: it applies
// the rank's CPUShare on the rank's host, where that host's processors are
// known. It reads them from Cpus_allowed_list of /proc/self/status (the
// affinity mask, which a Slurm step's cgroup narrows), or counts them with
// getconf where that is unreadable (then it does not bind); sets each of
// ThreadVars that the environment leaves unset; and execs ARGV, through
// taskset -c BLOCK when BIND is 1. It is one line, so that the shell's
// messages about ARGV ("gorovod-rank: 1: exec: ./train: not found") read
// as the ssh wrapper's do.
const cpuPrelude = `gorovod_i=$1 gorovod_k=$2 gorovod_bind=$3; shift 3; ` +
	`gorovod_list=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null); ` +
	`gorovod_cpus=; gorovod_n=0; gorovod_ifs=$IFS; IFS=,; ` +
	`for gorovod_r in $gorovod_list; do case $gorovod_r in ""|*[!0123456789-]*) continue;; esac; ` +
	`gorovod_a=${gorovod_r%-*}; gorovod_b=${gorovod_r#*-}; ` +
	`while [ "$gorovod_a" -le "$gorovod_b" ]; do gorovod_cpus="$gorovod_cpus $gorovod_a"; gorovod_n=$((gorovod_n + 1)); gorovod_a=$((gorovod_a + 1)); done; done; ` +
	`IFS=$gorovod_ifs; ` +
	`if [ "$gorovod_n" -eq 0 ]; then gorovod_n=$(getconf _NPROCESSORS_ONLN 2>/dev/null) || gorovod_n=1; fi; ` +
	`gorovod_lo=$((gorovod_i * gorovod_n / gorovod_k)); gorovod_hi=$(((gorovod_i + 1) * gorovod_n / gorovod_k)); ` +
	`[ "$gorovod_hi" -gt "$gorovod_lo" ] || gorovod_hi=$((gorovod_lo + 1)); ` +
	`if [ "$gorovod_bind" = 1 ]; then gorovod_t=$((gorovod_hi - gorovod_lo)); else gorovod_t=$((gorovod_n / gorovod_k)); [ "$gorovod_t" -ge 1 ] || gorovod_t=1; fi; ` +
	`gorovod_g=$gorovod_t; if [ "$gorovod_bind" != 1 ] && [ "$gorovod_g" -lt 2 ] && [ "$gorovod_n" -ge 2 ]; then gorovod_g=2; fi; ` +
	`[ -n "${GOMAXPROCS+x}" ] || export GOMAXPROCS=$gorovod_g; ` +
	`[ -n "${OMP_NUM_THREADS+x}" ] || export OMP_NUM_THREADS=$gorovod_t; ` +
	`[ -n "${OPENBLAS_NUM_THREADS+x}" ] || export OPENBLAS_NUM_THREADS=$gorovod_t; ` +
	`if [ "$gorovod_bind" = 1 ] && [ -n "$gorovod_cpus" ]; then gorovod_j=0; gorovod_mine=; ` +
	`for gorovod_c in $gorovod_cpus; do if [ "$gorovod_j" -ge "$gorovod_lo" ] && [ "$gorovod_j" -lt "$gorovod_hi" ]; then gorovod_mine=${gorovod_mine:+$gorovod_mine,}$gorovod_c; fi; gorovod_j=$((gorovod_j + 1)); done; ` +
	`command -v taskset >/dev/null 2>&1 || { echo "gorovod: --bind-to core needs taskset (util-linux) on $(uname -n)" >&2; exit 127; }; ` +
	`exec taskset -c "$gorovod_mine" "$@"; fi; ` +
	`exec "$@"`

// withCPUPrelude returns argv run through cpuPrelude for share, or argv
// itself when share is none.
func withCPUPrelude(share CPUShare, argv []string) []string {
	if share.Of <= 0 {
		return argv
	}
	bind := "0"
	if share.Bind {
		bind = "1"
	}
	return append([]string{"/bin/sh", "-c", cpuPrelude, sshWrapperName, strconv.Itoa(share.Index), strconv.Itoa(share.Of), bind}, argv...)
}
