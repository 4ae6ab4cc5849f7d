package jobenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"

	"github.com/gorovod/gorovod/rendezvous"
)

// machineFiles are where MachineID reads; tests point them elsewhere.
var machineFiles = struct{ bootID, status string }{
	bootID: "/proc/sys/kernel/random/boot_id",
	status: "/proc/self/status",
}

// MachineID names the processors this process runs on, so that ranks can
// tell which of them compete for the same ones: the kernel's boot id
// (which every network namespace and container of one kernel shares, and
// no other kernel has) and the processors the process may run on
// (Cpus_allowed_list). Two ranks with the same non-empty MachineID share a
// kernel and the same processors, whatever their network addresses say:
// the emulated hosts of internal/testlab, or containers of one node with
// addresses of their own. Ranks pinned to different processors get
// different values, since they do not compete. It returns "" where the
// kernel does not say (no /proc, another system): then nothing is known
// beyond the addresses. A value longer than rendezvous.MaxMachineLen (the
// most a rank may register) is shortened to the boot id and a digest of
// the processor list.
func MachineID() string {
	boot, err := os.ReadFile(machineFiles.bootID)
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(string(boot))
	if id == "" || len(id) > rendezvous.MaxMachineLen/2 {
		return ""
	}
	cpus := allowedCPUs(machineFiles.status)
	if cpus == "" {
		return ""
	}
	if m := id + "/" + cpus; len(m) <= rendezvous.MaxMachineLen {
		return m
	}
	sum := sha256.Sum256([]byte(cpus))
	return id + "/#" + hex.EncodeToString(sum[:8])
}

// allowedCPUs returns the Cpus_allowed_list of a /proc/PID/status file, or
// "" if it has none.
func allowedCPUs(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Cpus_allowed_list:")); ok {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}
