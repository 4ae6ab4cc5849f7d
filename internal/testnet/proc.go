package testnet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// KillTimeout bounds how long KillIn keeps killing the processes of a set
// of namespaces until none is left.
const KillTimeout = 10 * time.Second

// NSID identifies a namespace: the device and inode of its nsfs file.
type NSID struct{ Dev, Ino uint64 }

// Valid reports whether id names a namespace.
func (id NSID) Valid() bool { return id.Ino != 0 }

// NSOf returns the namespace of kind (net, pid, pid_for_children, uts,
// mnt, ...) of process pid.
func NSOf(pid int, kind string) (NSID, error) {
	return NSOfFile(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
}

// NSOfFile returns the namespace that path, an nsfs file such as
// /proc/PID/ns/net or /run/netns/NAME, stands for.
func NSOfFile(path string) (NSID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return NSID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return NSID{}, fmt.Errorf("testnet: no inode for %s", path)
	}
	return NSID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// SelfNS returns the current process's namespace of kind.
func SelfNS(kind string) NSID {
	id, _ := NSOf(os.Getpid(), kind)
	return id
}

// KillIn kills every process in one of the network or PID namespaces of
// set but the processes keep, until none is left or KillTimeout passes,
// and returns those left ("pid (command)"). The current process's own
// namespaces are never in the set.
func KillIn(set []NSID, keep ...int) []string {
	want := map[NSID]bool{}
	for _, id := range set {
		if id.Valid() && id != SelfNS("net") && id != SelfNS("pid") {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	deadline := time.Now().Add(KillTimeout)
	self := os.Getpid()
	for {
		var found []string
		for _, pid := range Pids() {
			if pid == self || slices.Contains(keep, pid) {
				continue
			}
			for _, kind := range []string{"net", "pid"} {
				if id, err := NSOf(pid, kind); err == nil && want[id] {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
					found = append(found, fmt.Sprintf("%d (%s)", pid, TrimNL(comm)))
					break
				}
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ChildOf returns a child of process pid, or 0.
func ChildOf(pid int) int {
	want := strconv.Itoa(pid)
	for _, p := range Pids() {
		if f := ProcStat(p); len(f) > 1 && f[1] == want {
			return p
		}
	}
	return 0
}

// StartLocked starts cmd on a locked thread: a parent-death signal
// (SysProcAttr.Pdeathsig) follows the thread that forked the child, which
// must not be one that the Go runtime may end meanwhile.
func StartLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// ProcStat returns the fields of /proc/pid/stat after the command name
// (state, ppid, ...), or nil.
func ProcStat(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return splitFields(data[i+1:])
}

// splitFields returns the space-separated fields of b.
func splitFields(b []byte) []string {
	var f []string
	for _, w := range bytes.Fields(b) {
		f = append(f, string(w))
	}
	return f
}

// Pids returns the processes now in /proc, sorted.
func Pids() []int {
	entries, _ := os.ReadDir("/proc")
	var list []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			list = append(list, pid)
		}
	}
	sort.Ints(list)
	return list
}

// TrimNL returns b as a string without a trailing newline.
func TrimNL(b []byte) string {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return string(b)
}
