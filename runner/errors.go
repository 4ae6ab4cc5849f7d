package runner

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gorovod/gorovod/internal/hostlist"
)

// Sentinel errors of package runner. Returned errors wrap them (with %w or an
// Unwrap method); test with errors.Is.
var (
	// ErrHosts reports a malformed -H host list: an empty item, a bad host
	// name, a slot count that is not a positive integer, or a duplicate host.
	ErrHosts = hostlist.ErrHosts
	// ErrHostfile reports a malformed hostfile or one that cannot be read.
	// The error is a *HostfileError carrying the line number and its text.
	ErrHostfile = errors.New("runner: bad hostfile")
	// ErrNoHosts reports an empty host list given to Assign.
	ErrNoHosts = errors.New("runner: no hosts")
	// ErrNumProc reports a process count (-np) that is zero or negative.
	ErrNumProc = errors.New("runner: bad -np")
	// ErrSlots reports that -np asks for more ranks than the hosts have slots.
	ErrSlots = errors.New("runner: not enough slots")
	// ErrConfig reports a Config that breaks one of its invariants (see
	// Config.Validate), or a rendezvous address that cannot be worked out.
	ErrConfig = errors.New("runner: bad configuration")
	// ErrInterrupted reports a job that Launch stopped because its context
	// ended (gorun received SIGINT or SIGTERM).
	ErrInterrupted = errors.New("runner: interrupted")
	// ErrElasticTimeout reports an elastic job that waited longer than its
	// elastic timeout for hosts enough for its --min-np ranks.
	ErrElasticTimeout = errors.New("runner: elastic job below --min-np")
)

// HostfileError describes what is wrong with a hostfile, and where.
type HostfileError struct {
	Path string // file name; "" when parsed from a reader
	Line int    // 1-based line number; 0 when the error is about the whole file
	Text string // the offending line, trimmed; "" when no line's text is at fault
	Err  error  // what is wrong (never nil from this package)
}

// Error formats the error as
// `runner: hostfile PATH line N: "TEXT": REASON`, leaving out empty parts.
func (e *HostfileError) Error() string {
	var b strings.Builder
	b.WriteString("runner: hostfile")
	if e.Path != "" {
		b.WriteString(" " + e.Path)
	}
	if e.Line > 0 {
		b.WriteString(" line " + strconv.Itoa(e.Line))
	}
	if e.Text != "" {
		b.WriteString(": " + strconv.Quote(clip(e.Text, maxQuoted)))
	}
	b.WriteString(": ")
	if e.Err == nil {
		b.WriteString("invalid")
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns ErrHostfile and the underlying reason, so that errors.Is
// matches both (for example ErrHostfile and fs.ErrNotExist).
func (e *HostfileError) Unwrap() []error { return []error{ErrHostfile, e.Err} }

// maxQuoted bounds how much of a user's input an error message repeats.
const maxQuoted = 120

// clip shortens s to at most n bytes, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
