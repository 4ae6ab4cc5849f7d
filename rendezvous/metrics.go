package rendezvous

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
)

// MaxMetricPoints bounds the points of one PushMetrics call.
const MaxMetricPoints = 8192

// MaxEventText bounds the Text of an event point, in bytes.
const MaxEventText = 4096

// MetricPoint is one value of a series that a rank sends with PushMetrics.
type MetricPoint struct {
	Step  int64
	Time  int64 // Unix nanoseconds
	Name  string
	Value float64
	// Runtime marks gorovod's own series ("hvd/..."); others are the
	// training code's scalars.
	Runtime bool
	// Text, when not empty, makes the point an event of the rank rather
	// than a value: Name is the event's kind ("stall") and Text says what
	// happened (at most MaxEventText bytes); Value is unused.
	Text string
}

// metricsReq is PushMetrics' request. Packed holds the points (see
// packPoints); Points is what clients before Packed sent, still taken.
type metricsReq struct {
	Rank   int
	Points []MetricPoint
	Packed []byte
}

// PushMetrics sends points of rank's series to the server's OnMetrics, in
// one attempt bounded by ctx and the call timeout, never retried (the
// caller counts what fails as dropped). A server without OnMetrics answers
// ErrNoMetrics. At most MaxMetricPoints points, names at most MaxKeyLen
// bytes.
func (c *Client) PushMetrics(ctx context.Context, rank int, points []MetricPoint) error {
	req := &metricsReq{Rank: rank, Points: points}
	if err := req.check(); err != nil {
		return err
	}
	buf := packBufs.Get().(*[]byte)
	*buf = packPoints((*buf)[:0], points)
	req.Packed, req.Points = *buf, nil
	_, err := c.call(ctx, "PushMetrics", req, c.opts.callTimeout)
	if err == nil { // answered, so written: its bytes are free again (after an error gorpc may still hold them)
		packBufs.Put(buf)
	}
	return err
}

// packBufs holds the buffers PushMetrics packs points into, so that a
// rank that sends every 250 ms does not allocate one each time.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// check validates a batch of metrics.
func (r *metricsReq) check() error {
	if r.Rank < 0 {
		return fmt.Errorf("%w: metrics of rank %d", ErrBadRequest, r.Rank)
	}
	if len(r.Points) > MaxMetricPoints {
		return fmt.Errorf("%w: %d metric points in one call, at most %d", ErrBadRequest, len(r.Points), MaxMetricPoints)
	}
	for _, p := range r.Points {
		if p.Name == "" || len(p.Name) > MaxKeyLen {
			return fmt.Errorf("%w: metric name of %d bytes, want 1 to %d", ErrBadRequest, len(p.Name), MaxKeyLen)
		}
		if len(p.Text) > MaxEventText {
			return fmt.Errorf("%w: event text of %d bytes, at most %d", ErrBadRequest, len(p.Text), MaxEventText)
		}
	}
	return nil
}

// PushMetrics hands a rank's batch of points to OnMetrics.
func (v *service) PushMetrics(r *metricsReq) error {
	if err := v.s.enter(); err != nil {
		return err
	}
	defer v.s.handlers.Leave()
	if v.s.cfg.OnMetrics == nil {
		return ErrNoMetrics
	}
	if r.Packed != nil {
		pts, err := unpackPoints(r.Packed)
		if err != nil {
			return fmt.Errorf("%w: metrics: %v", ErrBadRequest, err)
		}
		r.Points = pts
	}
	if err := r.check(); err != nil {
		return err
	}
	v.s.cfg.OnMetrics(r.Rank, r.Points)
	return nil
}

// The flags of a packed point.
const (
	packRuntime = 1 << iota // MetricPoint.Runtime
	packNewName             // the name follows (else its index among those before)
	packText                // a Text follows
)

// packNames numbers the names of a batch in order of first appearance.
// A batch has few names, mostly the same strings each call (a program's
// constants), so it scans the names so far, whose comparison with the
// same string is a pointer's, and only past packScan names keeps a map.
type packNames struct {
	list []string
	m    map[string]uint64
}

// packScan is how many names packNames scans before it keeps a map.
const packScan = 32

// index returns name's number and true, or numbers it and returns false.
func (n *packNames) index(name string) (uint64, bool) {
	if n.m != nil {
		if i, ok := n.m[name]; ok {
			return i, true
		}
		n.m[name] = uint64(len(n.m))
		return 0, false
	}
	for i, x := range n.list {
		if x == name {
			return uint64(i), true
		}
	}
	if len(n.list) < packScan {
		n.list = append(n.list, name)
		return 0, false
	}
	n.m = make(map[string]uint64, 2*packScan)
	for i, x := range n.list {
		n.m[x] = uint64(i)
	}
	n.m[name] = uint64(len(n.m))
	return 0, false
}

// packPoints encodes points compactly, appending to b, which costs a small part of what
// gob's reflection costs per point (this is the path of every
// hvd.LogScalars value): a count, then per point a flags byte, the name
// (its bytes the first time, later its index), the step and the time as
// differences from the point before, the value's bits and any text.
func packPoints(b []byte, points []MetricPoint) []byte {
	b = slices.Grow(b, 16+len(points)*16)
	b = binary.AppendUvarint(b, uint64(len(points)))
	var names packNames
	var step, at int64
	for _, p := range points {
		var flags byte
		if p.Runtime {
			flags |= packRuntime
		}
		idx, known := names.index(p.Name)
		if !known {
			flags |= packNewName
		}
		if p.Text != "" {
			flags |= packText
		}
		b = append(b, flags)
		if known {
			b = binary.AppendUvarint(b, idx)
		} else {
			b = binary.AppendUvarint(b, uint64(len(p.Name)))
			b = append(b, p.Name...)
		}
		b = binary.AppendVarint(b, p.Step-step)
		b = binary.AppendVarint(b, p.Time-at)
		step, at = p.Step, p.Time
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Value))
		if p.Text != "" {
			b = binary.AppendUvarint(b, uint64(len(p.Text)))
			b = append(b, p.Text...)
		}
	}
	return b
}

// unpackPoints decodes what packPoints encoded, within the limits of
// PushMetrics (MaxMetricPoints, MaxKeyLen, MaxEventText).
func unpackPoints(b []byte) ([]MetricPoint, error) {
	d := unpacker{b: b}
	n := d.uvarint()
	if d.err == nil && n > MaxMetricPoints {
		return nil, fmt.Errorf("%d points, at most %d", n, MaxMetricPoints)
	}
	points := make([]MetricPoint, 0, min(n, MaxMetricPoints))
	var names []string
	var step, at int64
	for range n {
		if d.err != nil {
			break
		}
		flags := d.byte()
		var p MetricPoint
		if flags&packNewName != 0 {
			name := d.bytes(MaxKeyLen)
			if d.err == nil && name == "" {
				d.err = fmt.Errorf("an empty metric name")
			}
			names = append(names, name)
			p.Name = name
		} else if i := d.uvarint(); d.err == nil {
			if i >= uint64(len(names)) {
				d.err = fmt.Errorf("name %d of %d", i, len(names))
				break
			}
			p.Name = names[i]
		}
		step += d.varint()
		at += d.varint()
		p.Step, p.Time = step, at
		p.Value = math.Float64frombits(d.uint64())
		p.Runtime = flags&packRuntime != 0
		if flags&packText != 0 {
			p.Text = d.bytes(MaxEventText)
		}
		points = append(points, p)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the points", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return points, nil
}

// unpacker reads packed points; its first error sticks.
type unpacker struct {
	b   []byte
	err error
}

func (d *unpacker) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated at %s", what)
	}
	d.b = nil
}

func (d *unpacker) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("a count")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *unpacker) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("a number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *unpacker) byte() byte {
	if len(d.b) < 1 {
		d.fail("flags")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *unpacker) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("a value")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// bytes reads a length and that many bytes, at most limit.
func (d *unpacker) bytes(limit int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(limit) {
		d.err = fmt.Errorf("a string of %d bytes, at most %d", n, limit)
		d.b = nil
		return ""
	}
	if uint64(len(d.b)) < n {
		d.fail("a string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
