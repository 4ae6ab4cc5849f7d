package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// OwnerFile, in an instance's directory, names the owner that made it, as
// the bridge's alias does.
const OwnerFile = "owner"

// WriteOwner writes owner (see SelfOwner) to path.
func WriteOwner(path, owner string) error {
	if err := os.WriteFile(path, []byte(owner+"\n"), 0o644); err != nil {
		return fmt.Errorf("testnet: %w", err)
	}
	return nil
}

// SelfOwner returns the current process's identity, "pid=P start=S", S
// being its start time in clock ticks since boot: a pid alone could be
// reused.
func SelfOwner() string {
	pid := os.Getpid()
	return fmt.Sprintf("pid=%d start=%s", pid, procStart(pid))
}

// OwnerAlive reports whether the process an owner string names still runs.
// It reports true for strings that name no process ("manual"): such an
// owner never dies.
func OwnerAlive(owner string) bool {
	var pid int
	var start string
	if n, _ := fmt.Sscanf(strings.TrimSpace(owner), "pid=%d start=%s", &pid, &start); n != 2 {
		return true
	}
	return procStart(pid) == start
}

// procStart returns the start time of process pid (field 22 of its stat
// file), or "" when there is no such process.
func procStart(pid int) string {
	f := ProcStat(pid)
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// NewID returns 6 random hexadecimal digits, an instance's identifier.
func NewID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

// IsID reports whether s could be an instance's identifier.
func IsID(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
