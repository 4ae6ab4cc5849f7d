package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// maxLineLen bounds how much of a line is held back: a longer line is
// passed on in pieces of this size (not counting its '\n').
const maxLineLen = 64 << 10

// lineWriter is an io.Writer that hands whole lines, each ending in '\n',
// to emit, keeping an unfinished line until it is completed or Flush. It
// never fails, so that a copier feeding it never stops reading a rank's
// pipe (which would block the rank). Safe for concurrent use.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(line []byte) // must not keep line
}

func newLineWriter(emit func(line []byte)) *lineWriter {
	return &lineWriter{emit: emit}
}

// Write passes on every line that p completes and keeps the rest.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		room := maxLineLen - len(w.buf)
		i := bytes.IndexByte(p, '\n')
		switch {
		case i >= 0 && i <= room: // p completes a line
			line := p[:i+1]
			p = p[i+1:]
			if len(w.buf) == 0 {
				w.emit(line)
				continue
			}
			w.buf = append(w.buf, line...)
			w.emitBuf()
		case len(p) < room: // p leaves the line unfinished
			w.buf = append(w.buf, p...)
			p = nil
		default: // the line is too long: pass on a piece
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			w.emitBuf()
		}
	}
	return n, nil
}

// Flush passes on an unfinished last line, as it is (without '\n').
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emitBuf()
	}
}

func (w *lineWriter) emitBuf() {
	w.emit(w.buf)
	w.buf = w.buf[:0]
}

// syncWriter is one of gorun's own output streams, shared by all ranks:
// each line goes out in a single Write under a lock that both streams
// share, so lines never mix, not even when stdout and stderr are one file.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

// writeLine writes prefix and line, ending the line with '\n' if it lacks
// one. Write errors are dropped: there is nowhere better to report them.
func (s *syncWriter) writeLine(prefix string, line []byte) {
	buf := make([]byte, 0, len(prefix)+len(line)+1)
	buf = append(buf, prefix...)
	if len(line) == 0 || line[0] == '\n' {
		buf = bytes.TrimSuffix(buf, []byte(" "))
	}
	buf = append(buf, line...)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		buf = append(buf, '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(buf)
}

// output fans the ranks' streams into gorun's stdout and stderr, each line
// prefixed "[R]<stdout>: " or "[R]<stderr>: ", and, with a directory, into
// DIR/rank.RR/stdout and DIR/rank.RR/stderr as well. R is the rank's launch
// index (the order gorun started it in) until an elastic job forms anew:
// from the moment gorun publishes a generation, R is the rank that the
// generation gives the worker (see rankOutput.setRank). Directories and
// --output-ranks keep the launch index.
type output struct {
	stdout, stderr *syncWriter
	dir            string
	width          int          // digits in rank directory names: at least 2 (rank.00, rank.07; rank.007 past 100 ranks)
	show           map[int]bool // the ranks shown on the terminal; nil: all
	stamp          func() time.Time
}

// outputOptions are the terminal's filters: the ranks it shows (nil:
// all; the others still go to their files) and a clock to prefix each
// line with the time (nil: no time).
type outputOptions struct {
	ranks []int
	now   func() time.Time
}

// newOutput prepares the output of a job of size ranks; dir may be "".
func newOutput(stdout, stderr io.Writer, dir string, size int, opts outputOptions) (*output, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("runner: output directory: %w", err)
		}
	}
	mu := new(sync.Mutex)
	return &output{
		stdout: &syncWriter{mu: mu, w: stdout},
		stderr: &syncWriter{mu: mu, w: stderr},
		dir:    dir,
		width:  max(2, len(strconv.Itoa(max(size-1, 0)))),
		show:   rankSet(opts.ranks),
		stamp:  opts.now,
	}, nil
}

// rankSet is ranks as a set, nil for none given.
func rankSet(ranks []int) map[int]bool {
	if ranks == nil {
		return nil
	}
	set := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		set[r] = true
	}
	return set
}

// rankOutput is where one rank's standard output and error go.
type rankOutput struct {
	Stdout, Stderr *rankStream
}

// open creates the streams of rank (and its files, with a directory).
func (o *output) open(rank int) (*rankOutput, error) {
	return o.openAs(fmt.Sprintf("rank.%0*d", o.width, rank), strconv.Itoa(rank), o.show == nil || o.show[rank])
}

// evaluatorName names the evaluator's output (gorun --evaluator): its
// prefix, "[evaluator]<stdout>: ", and its directory, DIR/evaluator.
const evaluatorName = "evaluator"

// openEvaluator creates the streams of the evaluator, which is not a rank;
// the terminal shows it unless --output-ranks names the ranks to show.
func (o *output) openEvaluator() (*rankOutput, error) {
	return o.openAs(evaluatorName, evaluatorName, o.show == nil)
}

// openAs creates the streams of a process whose lines show label, and
// its files in DIR/dirName with a directory; shown says whether the
// terminal shows them.
func (o *output) openAs(dirName, label string, shown bool) (*rankOutput, error) {
	var files [2]*os.File
	if o.dir != "" {
		dir := filepath.Join(o.dir, dirName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("runner: output of %s: %w", dirName, err)
		}
		for i, name := range []string{"stdout", "stderr"} {
			f, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				closeFiles(files[:i])
				return nil, fmt.Errorf("runner: output of %s: %w", dirName, err)
			}
			files[i] = f
		}
	}
	stdout, stderr := o.stdout, o.stderr
	if !shown {
		stdout, stderr = nil, nil // its files only
	}
	return &rankOutput{
		Stdout: newRankStream(stdout, labelPrefix(label, "stdout"), files[0], o.stamp),
		Stderr: newRankStream(stderr, labelPrefix(label, "stderr"), files[1], o.stamp),
	}, nil
}

// streamPrefix is the prefix of rank's lines on stream: "[R]<stdout>: ".
func streamPrefix(rank int, stream string) string { return labelPrefix(strconv.Itoa(rank), stream) }

// labelPrefix is the prefix of a process's lines on stream: "[label]<stdout>: ".
func labelPrefix(label, stream string) string { return "[" + label + "]<" + stream + ">: " }

// setRank makes the prefix of the lines the rank prints from now on show
// rank: the rank that an elastic job's latest generation gives the worker
// (a line the worker prints before it has formed that generation shows
// the new rank already).
func (r *rankOutput) setRank(rank int) {
	r.Stdout.setPrefix(streamPrefix(rank, "stdout"))
	r.Stderr.setPrefix(streamPrefix(rank, "stderr"))
}

// close flushes both streams and closes their files.
func (r *rankOutput) close() error {
	return errors.Join(r.Stdout.close(), r.Stderr.close())
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// stampLayout is the time before each line with
// --prefix-output-with-timestamp.
const stampLayout = "2006-01-02T15:04:05.000Z"

// rankStream is one stream of one rank: an io.Writer that prefixes each
// line onto a shared stream (none: the terminal does not show the rank)
// and copies it, unprefixed, to a file.
type rankStream struct {
	*lineWriter
	prefix  string   // before each line on the terminal; guarded by lineWriter.mu
	file    *os.File // nil without an output directory
	fileErr error    // first error writing file
}

func newRankStream(term *syncWriter, prefix string, file *os.File, stamp func() time.Time) *rankStream {
	s := &rankStream{prefix: prefix, file: file}
	s.lineWriter = newLineWriter(func(line []byte) { // called with lineWriter.mu held
		switch {
		case term == nil:
		case stamp != nil:
			term.writeLine(stamp().UTC().Format(stampLayout)+" "+s.prefix, line)
		default:
			term.writeLine(s.prefix, line)
		}
		if s.file != nil && s.fileErr == nil {
			_, s.fileErr = s.file.Write(line)
		}
	})
	return s
}

// setPrefix makes prefix the prefix of the lines passed on from now on.
func (s *rankStream) setPrefix(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prefix = prefix
}

// close flushes an unfinished line and closes the file, returning the first
// error writing or closing it.
func (s *rankStream) close() error {
	s.Flush()
	if s.file == nil {
		return nil
	}
	err := errors.Join(s.fileErr, s.file.Close())
	if err != nil {
		return fmt.Errorf("runner: %s: %w", s.file.Name(), err)
	}
	return nil
}
