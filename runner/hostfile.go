package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// maxHostfileLine bounds the length of one hostfile line, and
// maxHostfileSize the size of a whole hostfile: ParseHostfile reads at most
// one byte past it, so an endless input such as /dev/zero fails at once.
const (
	maxHostfileLine = 64 << 10
	maxHostfileSize = 1 << 20
)

// ReadHostfile reads and parses the hostfile at path (see ParseHostfile).
// Errors are *HostfileError values that name the file.
func ReadHostfile(path string) ([]Host, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &HostfileError{Path: path, Err: err}
	}
	defer f.Close()
	hosts, err := ParseHostfile(f)
	if he, ok := errors.AsType[*HostfileError](err); ok {
		he.Path = path
	}
	return hosts, err
}

// ParseHostfile parses a hostfile in the Open MPI form: one host per line,
// "host slots=N" or a bare "host" (one slot); '#' starts a comment that runs
// to the end of the line; blank lines are skipped. Any other line, a host
// listed twice, or a file with no hosts is an error; errors are
// *HostfileError values carrying the 1-based line number and its text. A
// line longer than 64 KiB, or more than 1 MiB in all, is an
// error too.
func ParseHostfile(r io.Reader) ([]Host, error) {
	lr := &io.LimitedReader{R: r, N: maxHostfileSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 4096), maxHostfileLine)
	var hosts []Host
	seen := make(map[string]int) // host key → line number
	line := 0
	// Past the limit the last line read is cut short: the size is what is
	// wrong, whatever that line says.
	tooLarge := func() error {
		if lr.N > 0 {
			return nil
		}
		return &HostfileError{Err: fmt.Errorf("larger than %d MiB, the most a hostfile may hold", maxHostfileSize>>20)}
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		h, ok, err := parseHostfileLine(text)
		if err != nil {
			if err := tooLarge(); err != nil {
				return nil, err
			}
			return nil, &HostfileError{Line: line, Text: text, Err: err}
		}
		if !ok {
			continue
		}
		if first, dup := seen[hostlist.Key(h.Name)]; dup {
			if err := tooLarge(); err != nil {
				return nil, err
			}
			err := fmt.Errorf("duplicate host %q (first on line %d)", h.Name, first)
			return nil, &HostfileError{Line: line, Text: text, Err: err}
		}
		seen[hostlist.Key(h.Name)] = line
		hosts = append(hosts, h)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes", maxHostfileLine)
		}
		return nil, &HostfileError{Line: line + 1, Err: err}
	}
	if err := tooLarge(); err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, &HostfileError{Err: errors.New("no hosts")}
	}
	return hosts, nil
}

// parseHostfileLine parses one trimmed line. ok is false for a blank or
// comment-only line.
func parseHostfileLine(text string) (h Host, ok bool, err error) {
	if i := strings.IndexByte(text, '#'); i >= 0 {
		text = text[:i]
	}
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return Host{}, false, nil
	}
	if len(fields) > 2 {
		return Host{}, false, errors.New(`expected "host" or "host slots=N"`)
	}
	name, err := parseHostfileName(fields[0])
	if err != nil {
		return Host{}, false, err
	}
	slots := 1
	if len(fields) == 2 {
		value, found := strings.CutPrefix(fields[1], "slots=")
		if !found {
			return Host{}, false, fmt.Errorf(`expected "slots=N" after the host, got %q`, clip(fields[1], maxQuoted))
		}
		if slots, err = hostlist.ParseSlots(value); err != nil {
			return Host{}, false, err
		}
	}
	return Host{Name: name, Slots: slots}, true, nil
}

// parseHostfileName checks the host token of a hostfile line, pointing users
// of the -H form ("host:2") at the hostfile form ("host slots=2").
func parseHostfileName(tok string) (string, error) {
	name, err := hostlist.ParseName(tok, true)
	if err == nil {
		return name, nil
	}
	if host, n, found := strings.Cut(tok, ":"); found && strings.Count(tok, ":") == 1 {
		_, herr := hostlist.ParseName(host, false)
		if _, serr := hostlist.ParseSlots(n); herr == nil && serr == nil {
			return "", fmt.Errorf(`bad host name %q (write "%s slots=%s" in a hostfile)`, clip(tok, maxQuoted), host, n)
		}
	}
	return "", err
}
