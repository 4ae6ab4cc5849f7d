package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/gorovod/gorovod/internal/hostlist"
)

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Host
	}{
		{"one", "a slots=2\n", []Host{{"a", 2}}},
		{"bare", "a", []Host{{"a", 1}}},
		{"no final newline", "a slots=2\nb slots=3", []Host{{"a", 2}, {"b", 3}}},
		{"comments and blanks",
			"# header\n\n  \na slots=4 # four\n\t# indented comment\nb#one slot\n",
			[]Host{{"a", 4}, {"b", 1}}},
		{"tabs and CRLF", "a\tslots=2\r\n\r\nb   slots=1  \r\n", []Host{{"a", 2}, {"b", 1}}},
		{"addresses", "10.0.0.1 slots=2\n::1 slots=3\n[fd00::7]\nfe80::1%eth0 slots=1\n",
			[]Host{{"10.0.0.1", 2}, {"::1", 3}, {"fd00::7", 1}, {"fe80::1%eth0", 1}}},
		{"leading zeros", "a slots=007", []Host{{"a", 7}}},
	}
	for _, tt := range tests {
		got, err := ParseHostfile(strings.NewReader(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct {
		in   string
		line int
		want string // substring of the message, besides the line and its text
	}{
		{"a slots=2\nb slots=1\nfoo slots=x\n", 3, `slot count "x" is not a positive integer`},
		{"a slots=0", 1, "at least 1"},
		{"a slots=", 1, "missing slot count"},
		{"a slots=-2", 1, "not a positive integer"},
		{"a slots=70000", 1, "exceeds the limit"},
		{"a slots = 2", 1, `expected "host" or "host slots=N"`},
		{"a slots=2 extra", 1, `expected "host" or "host slots=N"`},
		{"a max_slots=2", 1, `expected "slots=N" after the host, got "max_slots=2"`},
		{"a 2", 1, `expected "slots=N"`},
		{"# c\n\nnode4:2\n", 3, `write "node4 slots=2" in a hostfile`},
		{"a:b", 1, "bad host name"},
		{"-oProxyCommand=x", 1, "must not start with"},
		{"[::1 slots=2", 1, `"[::1" is not an IPv6 address`},
		{"[1.2.3.4]", 1, "not an IPv6 address"},
		{"a slots=2\n# x\nb\nA slots=3\n", 4, `duplicate host "A" (first on line 1)`},
		{"::1\n0::1 slots=2", 2, `duplicate host "::1" (first on line 1)`},
		{"slots=2", 1, `character '='`},
	}
	for _, tt := range tests {
		_, err := ParseHostfile(strings.NewReader(tt.in))
		var he *HostfileError
		if !errors.As(err, &he) {
			t.Errorf("ParseHostfile(%q): error %v is not a *HostfileError", tt.in, err)
			continue
		}
		text := strings.TrimSpace(strings.Split(tt.in, "\n")[tt.line-1])
		prefix := fmt.Sprintf("runner: hostfile line %d: %q: ", tt.line, text)
		msg := err.Error()
		if he.Line != tt.line || he.Text != text || !strings.HasPrefix(msg, prefix) {
			t.Errorf("ParseHostfile(%q) error %q (line %d), want prefix %q", tt.in, msg, he.Line, prefix)
		}
		if !strings.Contains(msg, tt.want) {
			t.Errorf("ParseHostfile(%q) error %q does not contain %q", tt.in, msg, tt.want)
		}
		if !errors.Is(err, ErrHostfile) {
			t.Errorf("ParseHostfile(%q): %v does not wrap ErrHostfile", tt.in, err)
		}
	}
}

func TestParseHostfileEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n", "# only a comment\n   # another\n"} {
		_, err := ParseHostfile(strings.NewReader(in))
		if !errors.Is(err, ErrHostfile) || !strings.Contains(fmt.Sprint(err), "no hosts") {
			t.Errorf("ParseHostfile(%q) = %v, want a no-hosts error", in, err)
		}
	}
}

func TestParseHostfileLongLine(t *testing.T) {
	in := "a\n# " + strings.Repeat("x", maxHostfileLine) + "\n"
	_, err := ParseHostfile(strings.NewReader(in))
	var he *HostfileError
	if !errors.As(err, &he) || he.Line != 2 || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v, want a line-2 too-long error", err)
	}
}

func TestReadHostfile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "hosts")
	if err := os.WriteFile(good, []byte("a slots=2\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts, err := ReadHostfile(good)
	if err != nil || !reflect.DeepEqual(hosts, []Host{{"a", 2}, {"b", 1}}) {
		t.Fatalf("ReadHostfile = %v, %v", hosts, err)
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("a\nb slots=q\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadHostfile(bad)
	if want := "runner: hostfile " + bad + ` line 2: "b slots=q": `; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("ReadHostfile(bad) = %v, want prefix %q", err, want)
	}

	_, err = ReadHostfile(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrHostfile) {
		t.Fatalf("ReadHostfile(missing) = %v, want ErrHostfile and fs.ErrNotExist", err)
	}
}

// TestHostfileExample keeps the documented example file parseable.
func TestHostfileExample(t *testing.T) {
	hosts, err := ReadHostfile("../hostfile.example")
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{"node1", 4}, {"node2", 4}, {"node3", 1}, {"10.0.0.7", 2}, {"fd00::7", 2}, {"fd00::8", 2}}
	if !reflect.DeepEqual(hosts, want) {
		t.Fatalf("hostfile.example = %v, want %v", hosts, want)
	}
}

// formatHostfile writes hosts in the hostfile form.
func formatHostfile(hosts []Host) string {
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s slots=%d\n", hostlist.Literal(h.Name), h.Slots)
	}
	return b.String()
}

func FuzzParseHostfile(f *testing.F) {
	for _, s := range []string{
		"a slots=2\nb\n", "# c\n\nx slots=1 # t\n", "::1 slots=2\n[fd00::1]\n", "a slots=x",
		"a:2", "a\na", "a slots=2 b", "\r\n", "a\tslots=99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ParseHostfile(strings.NewReader(s))
		if err != nil {
			var he *HostfileError
			if !errors.As(err, &he) || !errors.Is(err, ErrHostfile) || !strings.HasPrefix(err.Error(), "runner: hostfile") {
				t.Fatalf("ParseHostfile(%q): badly formed error %v", s, err)
			}
			return
		}
		text := formatHostfile(hosts)
		again, err := ParseHostfile(strings.NewReader(text))
		if err != nil || !reflect.DeepEqual(again, hosts) {
			t.Fatalf("ParseHostfile(%q) = %v; re-parsed %q = %v, %v", s, hosts, text, again, err)
		}
		if again, err := ParseHosts(FormatHosts(hosts)); err != nil || !reflect.DeepEqual(again, hosts) {
			t.Fatalf("hostfile %q = %v; as -H %q = %v, %v", s, hosts, FormatHosts(hosts), again, err)
		}
	})
}

// paddedHostfile is "a slots=2\n" followed by comment lines, n bytes in all.
func paddedHostfile(n int) string {
	var b strings.Builder
	b.WriteString("a slots=2\n")
	for b.Len() < n {
		line := min(n-b.Len(), 1000)
		b.WriteString("#" + strings.Repeat("x", line-2) + "\n")
	}
	return b.String()
}

// endless repeats its pattern forever, as `yes '#'` would.
type endless struct {
	pattern string
	off     int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.pattern[e.off]
		e.off = (e.off + 1) % len(e.pattern)
	}
	return len(p), nil
}

// TestHostfileSizeLimit: a hostfile may hold 1 MiB; past that, whether the
// cut falls in a comment or in the middle of a host line, or the input never
// ends, the error is the size, after reading at most a byte past it; an
// endless device fails at its first line, without reading it whole.
func TestHostfileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if len(paddedHostfile(maxHostfileSize)) != maxHostfileSize {
		t.Fatal("paddedHostfile is the wrong size")
	}
	hosts, err := ReadHostfile(write("full", paddedHostfile(maxHostfileSize)))
	if err != nil || !reflect.DeepEqual(hosts, []Host{{"a", 2}}) {
		t.Fatalf("a hostfile of exactly %d bytes: %v, %v", maxHostfileSize, hosts, err)
	}
	// Distinct hosts, so that the line the limit cuts would be a new host
	// or a bad one.
	var many strings.Builder
	for i := 0; many.Len() <= maxHostfileSize; i++ {
		fmt.Fprintf(&many, "host%d slots=2\n", i)
	}
	const tooLarge = "larger than 1 MiB, the most a hostfile may hold"
	for name, text := range map[string]string{"over": paddedHostfile(maxHostfileSize + 1), "many": many.String()} {
		path := write(name, text)
		_, err := ReadHostfile(path)
		if want := "runner: hostfile " + path + ": " + tooLarge; err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", name, err, want)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src := &endless{pattern: "# comment\n"}
	if _, err := ParseHostfile(src); err == nil || !strings.HasSuffix(err.Error(), tooLarge) {
		t.Errorf("endless comments: got %v, want %q", err, tooLarge)
	}
	_, err = ReadHostfile("/dev/zero")
	if want := "runner: hostfile /dev/zero line 1: line longer than 65536 bytes"; err == nil || err.Error() != want {
		t.Errorf("/dev/zero: got %v, want %s", err, want)
	}
	if _, err = ReadHostfile("/dev/urandom"); err == nil || !strings.HasPrefix(err.Error(), "runner: hostfile /dev/urandom") {
		t.Errorf("/dev/urandom: got %v, want an error naming it", err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("reading endless input allocated %d MiB", alloc>>20)
	}
}
