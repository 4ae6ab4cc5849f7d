package jobenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/rendezvous"
)

func TestMachineIDHere(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("boot id and Cpus_allowed_list are Linux's")
	}
	boot, err := os.ReadFile(machineFiles.bootID)
	if err != nil {
		t.Skipf("no boot id here: %v", err)
	}
	m := MachineID()
	want := strings.TrimSpace(string(boot)) + "/"
	if !strings.HasPrefix(m, want) || len(m) <= len(want) || len(m) > rendezvous.MaxMachineLen {
		t.Fatalf("MachineID() = %q, want the boot id %q, a slash and the processors", m, want)
	}
	if again := MachineID(); again != m {
		t.Fatalf("MachineID() changed from %q to %q", m, again)
	}
}

func TestMachineIDFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	boot := write("boot", "8b1c6f0e-3a2d-4c55-9e61-0f2b7d1a9c44\n")
	long := strings.Repeat("0,", 200) + "1"
	cases := []struct {
		name, boot, status, want string
	}{
		{"plain", boot, write("s1", "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t1\n"),
			"8b1c6f0e-3a2d-4c55-9e61-0f2b7d1a9c44/0-1"},
		{"pinned", boot, write("s2", "Cpus_allowed_list:\t5\n"), "8b1c6f0e-3a2d-4c55-9e61-0f2b7d1a9c44/5"},
		{"no boot id", filepath.Join(dir, "none"), write("s3", "Cpus_allowed_list:\t0-1\n"), ""},
		{"empty boot id", write("b2", "\n"), write("s4", "Cpus_allowed_list:\t0-1\n"), ""},
		{"no processors", boot, write("s5", "Name:\tx\n"), ""},
		{"no status", boot, filepath.Join(dir, "none"), ""},
	}
	saved := machineFiles
	t.Cleanup(func() { machineFiles = saved })
	for _, c := range cases {
		machineFiles.bootID, machineFiles.status = c.boot, c.status
		if got := MachineID(); got != c.want {
			t.Errorf("%s: MachineID() = %q, want %q", c.name, got, c.want)
		}
	}
	// A processor list too long to carry is shortened to a digest of it,
	// the same for the same list and another for another.
	machineFiles.bootID = boot
	machineFiles.status = write("s6", "Cpus_allowed_list:\t"+long+"\n")
	a := MachineID()
	machineFiles.status = write("s7", "Cpus_allowed_list:\t"+long+"0\n")
	b := MachineID()
	if !strings.HasPrefix(a, "8b1c6f0e-3a2d-4c55-9e61-0f2b7d1a9c44/#") || len(a) > rendezvous.MaxMachineLen || a == b {
		t.Fatalf("long lists: %q and %q, want bounded digests that differ", a, b)
	}
	machineFiles.status = write("s8", "Cpus_allowed_list:\t"+long+"\n")
	if again := MachineID(); again != a {
		t.Fatalf("the same long list gave %q, then %q", a, again)
	}
}
