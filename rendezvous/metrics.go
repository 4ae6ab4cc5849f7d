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
const MaxMetricPoints = 16384

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
// Batch); Points is what clients before Packed sent, still taken.
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
	b := packBatches.Get().(*Batch)
	b.Reset()
	for _, p := range points {
		b.Add(p)
	}
	err := c.PushBatch(ctx, rank, b)
	if err == nil { // answered, so written: its bytes are free again (after an error gorpc may still hold them)
		packBatches.Put(b)
	}
	return err
}

// packBatches holds the Batches PushMetrics packs points into, so that a
// process that sends every 250 ms does not allocate one each time.
var packBatches = sync.Pool{New: func() any { return new(Batch) }}

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
	if r.Packed == nil { // a client before Packed
		if err := r.check(); err != nil {
			return err
		}
		v.s.cfg.OnMetrics(r.Rank, r.Points)
		return nil
	}
	if r.Rank < 0 {
		return fmt.Errorf("%w: metrics of rank %d", ErrBadRequest, r.Rank)
	}
	// Unpacking checks what check does. OnMetrics does not keep the
	// slice, so the next batch reuses it.
	buf := unpackBufs.Get().(*[]MetricPoint)
	defer unpackBufs.Put(buf)
	pts, err := ReadBatch((*buf)[:0], r.Packed)
	*buf = pts[:0]
	if err != nil {
		clear(pts)
		return fmt.Errorf("%w: metrics: %v", ErrBadRequest, err)
	}
	v.s.cfg.OnMetrics(r.Rank, pts)
	clear(pts) // drop the strings it holds
	return nil
}

// unpackBufs holds the slices the server unpacks batches into, so that a
// server that receives a batch from every rank every 250 ms does not
// allocate and clear one each time.
var unpackBufs = sync.Pool{New: func() any { return new([]MetricPoint) }}

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

// reset forgets every name.
func (n *packNames) reset() {
	clear(n.list)
	n.list, n.m = n.list[:0], nil
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

// Batch is points packed as PushMetrics sends them, one point at a time,
// for a sender that would otherwise keep its points until it sends them
// and pack them then (hvd.LogScalars): a point costs about 14 bytes
// here against a MetricPoint's 64, and the packing is done. The zero
// Batch is empty. A Batch holds at most MaxMetricPoints points.
//
// The encoding, which is compact and costs a small part of what gob's
// reflection costs per point: a count, then per point a flags byte, the
// name (its bytes the first time, later its index), the step and the
// time as differences from the point before, the value's bits and any
// text.
type Batch struct {
	b        []byte // countLen bytes of count, then the points
	n        int
	names    packNames
	step, at int64
}

// countLen is the bytes of a Batch's count: a uvarint of three bytes even
// where fewer would do, written when the Batch is sent (binary.Uvarint
// reads such a uvarint as any other).
const countLen = 3

// Add packs p and reports whether it was valid and there was room: a name
// of 1 to MaxKeyLen bytes, a Text of at most MaxEventText, fewer than
// MaxMetricPoints points before it.
func (b *Batch) Add(p MetricPoint) bool {
	if p.Name == "" || len(p.Name) > MaxKeyLen || len(p.Text) > MaxEventText || b.n == MaxMetricPoints {
		return false
	}
	b.start()
	var flags byte
	if p.Runtime {
		flags |= packRuntime
	}
	idx, known := b.names.index(p.Name)
	if !known {
		flags |= packNewName
	}
	if p.Text != "" {
		flags |= packText
	}
	buf := append(b.b, flags)
	if known {
		buf = binary.AppendUvarint(buf, idx)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(p.Name)))
		buf = append(buf, p.Name...)
	}
	buf = binary.AppendVarint(buf, p.Step-b.step)
	buf = binary.AppendVarint(buf, p.Time-b.at)
	b.step, b.at = p.Step, p.Time
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(p.Value))
	if p.Text != "" {
		buf = binary.AppendUvarint(buf, uint64(len(p.Text)))
		buf = append(buf, p.Text...)
	}
	b.b = buf
	b.n++
	return true
}

// start gives a Batch that has no memory yet the room of its count.
func (b *Batch) start() {
	if b.b == nil {
		b.b = make([]byte, countLen, 256)
	}
}

// Len is the number of points in b.
func (b *Batch) Len() int { return b.n }

// Reset empties b, keeping its memory.
func (b *Batch) Reset() {
	b.b = b.b[:min(len(b.b), countLen)]
	b.n, b.step, b.at = 0, 0, 0
	b.names.reset()
}

// Bytes returns b's encoding (see Batch; ReadBatch reads it back), valid
// until b changes.
func (b *Batch) Bytes() []byte {
	b.start()
	b.b[0], b.b[1], b.b[2] = byte(b.n)|0x80, byte(b.n>>7)|0x80, byte(b.n>>14) // MaxMetricPoints < 1<<21
	return b.b
}

// PushBatch sends b's points like PushMetrics (one attempt, never
// retried) and leaves b as it was.
func (c *Client) PushBatch(ctx context.Context, rank int, b *Batch) error {
	if rank < 0 {
		return fmt.Errorf("%w: metrics of rank %d", ErrBadRequest, rank)
	}
	_, err := c.call(ctx, "PushMetrics", &metricsReq{Rank: rank, Packed: b.Bytes()}, c.opts.callTimeout)
	return err
}

// ReadBatch decodes the points of a Batch's Bytes, appending them to dst;
// it fails on an encoding that is cut, altered or past the limits of
// PushMetrics (MaxMetricPoints, MaxKeyLen, MaxEventText). On an error, it
// returns dst with what it appended so far and the error.
func ReadBatch(dst []MetricPoint, b []byte) ([]MetricPoint, error) {
	d := unpacker{b: b}
	n := d.uvarint()
	if d.err == nil && n > MaxMetricPoints {
		return dst, fmt.Errorf("%d points, at most %d", n, MaxMetricPoints)
	}
	points := slices.Grow(dst, int(min(n, uint64(len(b)/minPacked))))
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
	return points, d.err
}

// minPacked is the fewest bytes a packed point takes: flags, a name's
// index, the step's and the time's differences, and the value.
const minPacked = 1 + 1 + 1 + 1 + 8

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
