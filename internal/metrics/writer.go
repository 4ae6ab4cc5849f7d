package metrics

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// DefaultWriterLimit bounds a metrics.jsonl file: 1 GiB.
const DefaultWriterLimit = 1 << 30

// FlushInterval is how often a Writer writes and flushes the lines of
// what it took.
const FlushInterval = time.Second

// LineBudget is the time a Writer spends on lines every FlushInterval at
// most while it is open (1/400 of one processor; it counts wall time, so
// on a loaded machine it spends less); what it has no time for waits in
// its spool, and Close writes it.
const LineBudget = FlushInterval / 400

// spoolRecord is the most points a spool record holds, so that a Writer
// keeps to LineBudget to within a record's lines.
const spoolRecord = 512

// The kinds of spool record.
const (
	recPoints = 'P' // a rank, its host, and a rendezvous.Batch of points
	recLine   = 'L' // a line, as it goes to the file
)

// Writer writes points and events to a file as JSON lines (metrics.jsonl):
// a point is a line {"rank":0,"host":"a","step":10,"time":...,
// "kind":"scalar","name":"loss","value":0.5}, where a per-peer runtime
// series (SplitPeer) has the name without the peer and the peer's rank in
// a field peer ({"rank":0,...,"name":"hvd/link_sent_bytes","peer":1,
// "value":4096}), as /metrics has it in a label; a value that JSON cannot
// hold is a string ("NaN", "+Inf", "-Inf"). An event is an Event's JSON
// inside {"event":{...}}. It stops writing, with one warning in the log,
// before the file would pass its limit. Its methods are safe for
// concurrent use.
//
// A line costs about 140 ns to format (BenchmarkWriterPoints), which gorun
// cannot afford for every point of ranks that publish tens of thousands a
// second on processors they keep busy. So WritePoints and WriteEvent only
// append what they take to a spool, in the encoding of rendezvous.Batch
// (about 15 bytes a point against about 130 for its line), and every
// FlushInterval a goroutine writes the spool's lines and flushes them,
// spending at most LineBudget of processor time; Close writes the rest
// (the order is kept). A job that publishes up to about 15,000 points a
// second has its lines in the file within a second; one that publishes
// more has them, beyond that rate, when gorun ends. The spool is a file in
// the directory of the file, removed as soon as it is made: if gorun is
// killed, the lines of the points still in it are lost with it.
type Writer struct {
	log   *slog.Logger
	limit int64

	mu      sync.Mutex // the spool's side
	spool   *os.File
	sw      *bufio.Writer
	rec     []byte // the record being encoded
	batch   rendezvous.Batch
	spooled int64 // the end of the last record given to sw
	sfull   bool  // the spool reached limit
	serr    error // the spool's first write error
	closed  bool

	lmu     sync.Mutex // the lines' side
	f       *os.File
	w       *bufio.Writer
	read    int64 // where the next record to write lines for starts
	sr      *bufio.Reader
	pts     []rendezvous.MetricPoint
	line    []byte   // a record's bytes
	out     []byte   // a point's line
	times   timeText // the time of the last point line, formatted
	written int64
	full    bool  // the limit was reached
	err     error // the first write error
	done    bool  // Close wrote every line

	budget time.Duration // LineBudget, or a test's
	stop   chan struct{}
	ended  chan struct{}
}

// eventLine is how an event appears in the file.
type eventLine struct {
	Event Event `json:"event"`
}

// NewWriter creates (or truncates) path and returns a Writer to it that
// writes at most limit bytes (0: DefaultWriterLimit). log gets the
// warning when the limit is reached; nil discards it.
func NewWriter(path string, limit int64, log *slog.Logger) (*Writer, error) {
	return newWriter(path, limit, log, LineBudget)
}

// newWriter is NewWriter spending budget on lines every FlushInterval.
func newWriter(path string, limit int64, log *slog.Logger, budget time.Duration) (*Writer, error) {
	if limit <= 0 {
		limit = DefaultWriterLimit
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	spool, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".spool-*")
	if err == nil {
		err = os.Remove(spool.Name())
	}
	if err != nil {
		f.Close()
		if spool != nil {
			spool.Close()
		}
		return nil, fmt.Errorf("metrics: a spool beside %s: %w", path, err)
	}
	w := &Writer{log: log, limit: limit, f: f, w: bufio.NewWriterSize(f, 64<<10),
		spool: spool, sw: bufio.NewWriterSize(spool, 64<<10), sr: bufio.NewReaderSize(nil, 64<<10),
		budget: budget, stop: make(chan struct{}), ended: make(chan struct{})}
	go w.flusher()
	return w, nil
}

// flusher writes lines and flushes every FlushInterval until Close
// ("metrics-writer").
func (w *Writer) flusher() {
	defer close(w.ended)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.lines(w.budget)
		case <-w.stop:
			return
		}
	}
}

// lines writes the lines of what the spool holds, for at most budget of
// processor time (a record's lines at least; 0: no bound), and flushes
// them.
func (w *Writer) lines(budget time.Duration) {
	w.mu.Lock()
	if !w.closed && w.serr == nil {
		if err := w.sw.Flush(); err != nil {
			w.spoolFailed(err)
		}
	}
	end := w.spooled // a record's end, and all before it is in the spool's file
	w.mu.Unlock()

	w.lmu.Lock()
	defer w.lmu.Unlock()
	if w.done {
		return
	}
	t0 := time.Now() // wall time: at least the processor time spent
	w.sr.Reset(io.NewSectionReader(w.spool, w.read, end-w.read))
	for w.read < end && !w.full && w.err == nil {
		n, err := w.record()
		if err != nil { // unreachable: the spool holds what the Writer encoded
			w.err = err
			w.log.Warn("metrics: cannot read the metrics spool; no more metrics go to the file", "file", w.f.Name(), "err", err)
			break
		}
		w.read += n
		if budget > 0 && time.Since(t0) >= budget {
			break
		}
	}
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = err
			w.log.Warn("metrics: cannot write the metrics file; no more metrics go to it", "file", w.f.Name(), "err", err)
		}
	}
}

// record writes the lines of the spool's next record and returns its
// length; w.lmu is held.
func (w *Writer) record() (int64, error) {
	kind, err := w.sr.ReadByte()
	if err != nil {
		return 0, err
	}
	n := int64(1)
	readBytes := func() ([]byte, error) {
		size, err := binary.ReadUvarint(w.sr)
		if err != nil {
			return nil, err
		}
		n += int64(uvarintLen(size)) + int64(size)
		w.line = slices.Grow(w.line[:0], int(size))[:size]
		_, err = io.ReadFull(w.sr, w.line)
		return w.line, err
	}
	switch kind {
	case recLine:
		b, err := readBytes()
		if err != nil {
			return 0, err
		}
		w.writeLine(b)
	case recPoints:
		rank, err := binary.ReadUvarint(w.sr)
		if err != nil {
			return 0, err
		}
		n += int64(uvarintLen(rank))
		host, err := readBytes()
		if err != nil {
			return 0, err
		}
		p := Point{Rank: int(rank), Host: string(host)}
		packed, err := readBytes()
		if err != nil {
			return 0, err
		}
		if w.pts, err = rendezvous.ReadBatch(w.pts[:0], packed); err != nil {
			return 0, err
		}
		for _, mp := range w.pts {
			p.Step, p.Time, p.Name, p.Value, p.Kind = mp.Step, time.Unix(0, mp.Time), mp.Name, mp.Value, Scalar
			if mp.Runtime {
				p.Kind = Runtime
			}
			w.out = pointJSON(w.out[:0], &p, &w.times)
			if w.out != nil && !w.writeLine(w.out) {
				break
			}
		}
		clear(w.pts)
	default:
		return 0, fmt.Errorf("a record of kind %d", kind)
	}
	return n, nil
}

// uvarintLen is the bytes of x's uvarint.
func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}

// writeLine writes b and a newline to the file and reports whether the
// Writer still writes; w.lmu is held.
func (w *Writer) writeLine(b []byte) bool {
	if w.full || w.err != nil {
		return false
	}
	if w.written+int64(len(b))+1 > w.limit {
		w.full = true
		w.log.Warn("metrics: the metrics file reached its size limit; no more metrics go to it", "file", w.f.Name(), "limit_bytes", w.limit)
		return false
	}
	_, err := w.w.Write(b)
	if err == nil {
		err = w.w.WriteByte('\n')
	}
	if err != nil {
		w.err = err
		w.log.Warn("metrics: cannot write the metrics file; no more metrics go to it", "file", w.f.Name(), "err", err)
		return false
	}
	w.written += int64(len(b)) + 1
	return true
}

// pointLine is how a point appears in the file: Peer is set for a
// per-peer series, whose Name then has no peer; Value is a float64, or a
// string for a value JSON has none of.
type pointLine struct {
	Rank  int       `json:"rank"`
	Host  string    `json:"host,omitempty"`
	Step  int64     `json:"step"`
	Time  time.Time `json:"time"`
	Kind  Kind      `json:"kind"`
	Name  string    `json:"name"`
	Peer  *int      `json:"peer,omitempty"`
	Value any       `json:"value"`
}

// pointJSON appends p's line to b: appendPointLine's, or encoding/json's
// where appendPointLine declines; nil if neither writes it.
func pointJSON(b []byte, p *Point, tt *timeText) []byte {
	if l := appendPointLine(b, p, tt); l != nil {
		return l
	}
	j, err := json.Marshal(line(p))
	if err != nil {
		return nil
	}
	return append(b, j...)
}

// line returns p as it appears in the file.
func line(p *Point) pointLine {
	l := pointLine{Rank: p.Rank, Host: p.Host, Step: p.Step, Time: p.Time, Kind: p.Kind, Name: p.Name, Value: p.Value}
	if base, peer, ok := SplitPeer(p.Kind, p.Name); ok {
		l.Name, l.Peer = base, &peer
	}
	if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
		l.Value = fmt.Sprint(p.Value)
	}
	return l
}

// appendPointLine appends p's line, the bytes json.Marshal(line(p))
// makes, to b without reflection (a point line costs a tenth as much),
// or returns nil where p has a string that needs escaping or a time
// outside the years 0 to 9999: those go through json.Marshal.
//
// The points of one LogScalars call share their time, so the last time
// formatted is kept in tt (nil: none).
func appendPointLine(b []byte, p *Point, tt *timeText) []byte {
	name, peer, hasPeer := p.Name, 0, false
	if base, n, ok := SplitPeer(p.Kind, p.Name); ok {
		name, peer, hasPeer = base, n, true
	}
	if y := p.Time.Year(); y < 0 || y > 9999 || !plainJSON(p.Host) || !plainJSON(string(p.Kind)) || !plainJSON(name) {
		return nil
	}
	b = append(b, `{"rank":`...)
	b = strconv.AppendInt(b, int64(p.Rank), 10)
	if p.Host != "" {
		b = append(append(append(b, `,"host":"`...), p.Host...), '"')
	}
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, p.Step, 10)
	b = append(b, `,"time":"`...)
	b = tt.append(b, p.Time)
	b = append(append(append(b, `","kind":"`...), p.Kind...), `","name":"`...)
	b = append(append(b, name...), '"')
	if hasPeer {
		b = append(b, `,"peer":`...)
		b = strconv.AppendInt(b, int64(peer), 10)
	}
	b = append(b, `,"value":`...)
	switch v := p.Value; {
	case math.IsNaN(v) || math.IsInf(v, 0):
		b = append(append(append(b, '"'), fmt.Sprint(v)...), '"')
	default:
		b = appendJSONFloat(b, v)
	}
	return append(b, '}')
}

// timeText is a time and its RFC 3339 text (as time.Time's MarshalJSON
// writes it), kept to be written again.
type timeText struct {
	t    time.Time
	text []byte
}

// append appends t's text to b, formatting it only when it is not tt's
// time (in the same location); a nil tt formats every time.
func (tt *timeText) append(b []byte, t time.Time) []byte {
	if tt == nil {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	if tt.text == nil || !t.Equal(tt.t) || t.Location() != tt.t.Location() {
		tt.t, tt.text = t, t.AppendFormat(tt.text[:0], time.RFC3339Nano)
	}
	return append(b, tt.text...)
}

// plainJSON reports whether s is written in JSON as it is, between
// quotes: printable ASCII without the characters encoding/json escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendJSONFloat appends a finite v as encoding/json writes a float64:
// the shortest decimal that reads back as v, in exponent form below 1e-6
// and from 1e21 on, with a one-digit exponent written without a zero.
func appendJSONFloat(b []byte, v float64) []byte {
	format := byte('f')
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if format == 'e' { // "1e-07" becomes "1e-7"
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b
}

// WritePoints takes the points, for lines in this order.
func (w *Writer) WritePoints(points []Point) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(points) > 0 && w.spooling() {
		n := w.spoolPoints(points)
		points = points[n:]
	}
}

// WriteEvent takes e, for its line after those of the points before it.
func (w *Writer) WriteEvent(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.spooling() {
		return
	}
	if j, err := json.Marshal(eventLine{e}); err == nil {
		w.spoolLine(j)
	}
}

// spooling reports whether the spool takes records; w.mu is held.
func (w *Writer) spooling() bool { return !w.closed && !w.sfull && w.serr == nil }

// packable reports whether p can go into a spool record of points, which
// keeps what a rendezvous.MetricPoint has: a scalar or runtime point with
// a name PushMetrics takes and a time in the local zone (as the points of
// ranks have) that Unix nanoseconds hold.
func packable(p *Point) bool {
	return (p.Kind == Scalar || p.Kind == Runtime) && p.Name != "" && len(p.Name) <= rendezvous.MaxKeyLen &&
		p.Time.Location() == time.Local && p.Time.Equal(time.Unix(0, p.Time.UnixNano()))
}

// spoolPoints puts a record of the first points in the spool (those of
// one rank and host that packable takes, at most spoolRecord; else the
// first point's line) and returns how many it took; w.mu is held.
func (w *Writer) spoolPoints(points []Point) int {
	first := &points[0]
	if !packable(first) {
		if b := pointJSON(nil, first, nil); b != nil {
			w.spoolLine(b)
		}
		return 1
	}
	w.batch.Reset()
	n := 0
	for n < len(points) && n < spoolRecord {
		p := &points[n]
		if p.Rank != first.Rank || p.Host != first.Host || !packable(p) {
			break
		}
		w.batch.Add(rendezvous.MetricPoint{Step: p.Step, Time: p.Time.UnixNano(), Name: p.Name, Value: p.Value, Runtime: p.Kind == Runtime})
		n++
	}
	w.spoolBatch(first.Rank, first.Host)
	return n
}

// WriteRankPoints takes points of rank on host as they came from it
// (rendezvous.Server's OnMetrics; no events), for lines in this order, as
// WritePoints would take their Points (Store.AddRankPoints).
func (w *Writer) WriteRankPoints(rank int, host string, pts []rendezvous.MetricPoint) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(pts) > 0 && w.spooling() {
		w.batch.Reset()
		n := 0
		for ; n < len(pts) && n < spoolRecord; n++ {
			w.batch.Add(pts[n]) // valid: the rendezvous took it
		}
		w.spoolBatch(rank, host)
		pts = pts[n:]
	}
}

// spoolBatch puts a record of w.batch's points, of rank on host, in the
// spool; w.mu is held.
func (w *Writer) spoolBatch(rank int, host string) {
	packed := w.batch.Bytes()
	b := append(w.rec[:0], recPoints)
	b = binary.AppendUvarint(b, uint64(rank))
	b = binary.AppendUvarint(b, uint64(len(host)))
	b = append(b, host...)
	w.rec = binary.AppendUvarint(b, uint64(len(packed)))
	w.spoolRecord(w.rec, packed)
}

// spoolLine puts a record of one line in the spool; w.mu is held.
func (w *Writer) spoolLine(line []byte) {
	w.rec = binary.AppendUvarint(append(w.rec[:0], recLine), uint64(len(line)))
	w.spoolRecord(w.rec, line)
}

// spoolRecord appends a record, head then body, to the spool, unless the
// spool would pass the Writer's limit; w.mu is held.
func (w *Writer) spoolRecord(head, body []byte) {
	if w.spooled+int64(len(head)+len(body)) > w.limit {
		w.sfull = true
		w.log.Warn("metrics: the metrics spool reached the file's size limit; no more metrics go to the file", "file", w.f.Name(), "limit_bytes", w.limit)
		return
	}
	_, err := w.sw.Write(head)
	if err == nil {
		_, err = w.sw.Write(body)
	}
	if err != nil {
		w.spoolFailed(err)
		return
	}
	w.spooled += int64(len(head) + len(body))
}

// spoolFailed stops the spool after err; w.mu is held.
func (w *Writer) spoolFailed(err error) {
	if w.serr == nil {
		w.serr = err
		w.log.Warn("metrics: cannot write the metrics spool; no more metrics go to the file", "file", w.f.Name(), "err", err)
	}
}

// Close writes the lines of everything taken, closes the file and the
// spool, and returns the first error. The lines of points that waited in
// the spool take about 140 ns a point (BenchmarkWriterPoints): about a
// second for a file at DefaultWriterLimit.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	if w.serr == nil {
		if err := w.sw.Flush(); err != nil {
			w.spoolFailed(err)
		}
	}
	w.closed = true
	serr := w.serr
	w.mu.Unlock()
	close(w.stop)
	<-w.ended
	w.lines(0)
	w.lmu.Lock()
	defer w.lmu.Unlock()
	w.done = true
	err := w.err
	if err == nil {
		err = serr
	}
	if cerr := w.f.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		err = cerr
	}
	w.spool.Close()
	if err != nil {
		return fmt.Errorf("metrics: %s: %w", w.f.Name(), err)
	}
	return nil
}
