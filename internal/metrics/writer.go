package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"time"
)

// DefaultWriterLimit bounds a metrics.jsonl file: 1 GiB.
const DefaultWriterLimit = 1 << 30

// FlushInterval is how often a Writer flushes what it buffered.
const FlushInterval = time.Second

// Writer writes points and events to a file as JSON lines (metrics.jsonl):
// a point is a line {"rank":0,"host":"a","step":10,"time":...,
// "kind":"scalar","name":"loss","value":0.5}, where a per-peer runtime
// series (SplitPeer) has the name without the peer and the peer's rank in
// a field peer ({"rank":0,...,"name":"hvd/link_sent_bytes","peer":1,
// "value":4096}), as /metrics has it in a label; a value that JSON cannot
// hold is a string ("NaN", "+Inf", "-Inf"). An event is an Event's JSON
// inside {"event":{...}}. It buffers, flushes every FlushInterval and
// on Close, and stops writing, with one warning in the log, before the
// file would pass its limit. Its methods are safe for concurrent use.
type Writer struct {
	log   *slog.Logger
	limit int64

	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	line    []byte
	times   timeText // the time of the last point line, formatted
	written int64
	full    bool  // the limit was reached
	err     error // the first write error
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// eventLine is how an event appears in the file.
type eventLine struct {
	Event Event `json:"event"`
}

// NewWriter creates (or truncates) path and returns a Writer to it that
// writes at most limit bytes (0: DefaultWriterLimit). log gets the
// warning when the limit is reached; nil discards it.
func NewWriter(path string, limit int64, log *slog.Logger) (*Writer, error) {
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
	w := &Writer{log: log, limit: limit, f: f, w: bufio.NewWriterSize(f, 64<<10),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.flusher()
	return w, nil
}

// flusher flushes every FlushInterval until Close ("metrics-writer").
func (w *Writer) flusher() {
	defer close(w.done)
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.mu.Lock()
			w.flushLocked()
			w.mu.Unlock()
		case <-w.stop:
			return
		}
	}
}

// flushLocked flushes the buffer, keeping the first error; w.mu is held.
func (w *Writer) flushLocked() {
	if w.closed {
		return
	}
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
		w.log.Warn("metrics: cannot write the metrics file; no more metrics go to it", "file", w.f.Name(), "err", err)
	}
}

// WritePoints writes one line per point.
func (w *Writer) WritePoints(points []Point) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range points {
		if !w.writeLocked(&points[i]) {
			return
		}
	}
}

// WriteEvent writes one line for e.
func (w *Writer) WriteEvent(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeLocked(eventLine{e})
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

// writeLocked writes v (a *Point or an eventLine) as one line and reports
// whether the Writer still writes; w.mu is held.
func (w *Writer) writeLocked(v any) bool {
	if w.closed || w.full || w.err != nil {
		return false
	}
	var b []byte
	if p, ok := v.(*Point); ok {
		if b = appendPointLine(w.line[:0], p, &w.times); b == nil {
			v = line(p) // a string or time that the quick way does not write
		} else {
			v = nil
		}
	}
	if v != nil {
		j, err := json.Marshal(v)
		if err != nil {
			return true
		}
		b = append(w.line[:0], j...)
	}
	if w.written+int64(len(b))+1 > w.limit {
		w.full = true
		w.log.Warn("metrics: the metrics file reached its size limit; no more metrics go to it", "file", w.f.Name(), "limit_bytes", w.limit)
		return false
	}
	w.line = append(b, '\n')
	if _, err := w.w.Write(w.line); err != nil {
		w.err = err
		w.log.Warn("metrics: cannot write the metrics file; no more metrics go to it", "file", w.f.Name(), "err", err)
		return false
	}
	w.written += int64(len(w.line))
	return true
}

// Written is how many bytes the Writer has accepted (buffered or written).
func (w *Writer) Written() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written
}

// Close flushes and closes the file and returns the first error.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.flushLocked()
	w.closed = true
	err := w.err
	if cerr := w.f.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		err = cerr
	}
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	if err != nil {
		return fmt.Errorf("metrics: %s: %w", w.f.Name(), err)
	}
	return nil
}
