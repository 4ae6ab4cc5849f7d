package ps

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The data link: Pulls and Pushes between a client and a server go over a
// second connection to the same address, authenticated with the same
// handshake (its own hello, srvHelloData), that carries plain framed bytes
// instead of gorpc's gob messages. gob copies a message into its own
// buffer on both sides and allocates the received one anew; on the data
// link a float64 Push is written from the gradient slices themselves (one
// writev) and a Pull is read straight into the destination slices, so the
// values are copied only by the kernel. The data plane of all-reduce makes
// the same choice for the same reason. Everything else (Create, Attach,
// Load, Drop, Shutdown, Ping) stays on gorpc, and a client whose data
// link cannot be set up, or breaks, goes on over gorpc.
//
// A request is a 24-byte header, then the payload:
//
//	[0] op (dataPull, dataPush)  [1] wire  [2:4] zero  [4:8] worker (int32)
//	[8:16] wait, ns (Pull: how long the server may hold it for the staleness bound)
//	[16:24] payload bytes (Push: the gradient; Pull: 0)
//
// An answer is a 24-byte header, then the payload:
//
//	[0] status (dataOK, dataNotReady, dataError)  [1:8] zero
//	[8:16] step  [16:24] payload bytes (Pull: the values; dataError: the message)
//
// The server answers requests one at a time, in order. A request it
// refuses (a wrong length, an unknown op or wire) gets a dataError answer
// and the link is closed, since the stream cannot be trusted after it.
const (
	srvHelloData = "gorovod-ps-data/1"

	dataHeader = 24

	dataPull = 1
	dataPush = 2

	dataOK       = 0
	dataNotReady = 1
	dataError    = 2

	// dataMaxError bounds an error message on the link.
	dataMaxError = 4 << 10
	// dataPayloadTimeout bounds reading a payload once its header has
	// come, on the server: a peer that stops in the middle is dropped.
	dataPayloadTimeout = 30 * time.Second
)

// serveData answers one data link until it breaks or the server stops.
// It runs on the connection's own goroutine (gorpc's, inside OnConnect).
func (s *Server) serveData(c net.Conn) {
	if !s.dataConns.Add(c) {
		c.Close()
		return
	}
	defer func() {
		s.dataConns.Remove(c)
		c.Close()
	}()
	var (
		hdr  [dataHeader]byte
		vals []float64 // a Push's gradient, read in place (float64 wire)
		raw  []byte    // a Push's float32 gradient, or a Pull's answer
	)
	for {
		c.SetReadDeadline(time.Time{})
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		op, wire := hdr[0], Wire(hdr[1])
		worker := int(int32(binary.LittleEndian.Uint32(hdr[4:])))
		wait := time.Duration(binary.LittleEndian.Uint64(hdr[8:]))
		n := binary.LittleEndian.Uint64(hdr[16:])
		if err := s.enter(); err != nil {
			s.dataAnswer(c, dataError, 0, []byte(err.Error()))
			return
		}
		var err error
		switch {
		case op != dataPull && op != dataPush:
			err = fmt.Errorf("%w: data link: unknown op %d", ErrBadRequest, op)
		case !wire.valid():
			err = fmt.Errorf("%w: data link: unknown wire type %d", ErrBadRequest, int(wire))
		case hdr[2] != 0 || hdr[3] != 0:
			err = fmt.Errorf("%w: data link: malformed header", ErrBadRequest)
		default:
			err = srvCheckWorker(worker)
		}
		var t *srvTable
		if err == nil {
			t, err = s.tbl()
		}
		if err == nil && op == dataPull && n != 0 {
			err = fmt.Errorf("%w: data link: a Pull with a %d-byte payload", ErrBadRequest, n)
		}
		if err == nil && op == dataPush && n != uint64(t.bytes/8*wire.size()) {
			err = fmt.Errorf("%w: Push carries %d bytes of %v gradients, server %d holds %d values", ErrBadRequest, n, wire, s.cfg.Index, t.bytes/8)
		}
		if err != nil {
			s.handlers.Leave()
			s.dataAnswer(c, dataError, 0, []byte(err.Error()))
			return
		}
		if op == dataPush {
			c.SetReadDeadline(time.Now().Add(dataPayloadTimeout))
			var g []float64
			if wire == WireFloat64 && hostLittle {
				if len(vals) < t.bytes/8 {
					vals = make([]float64, t.bytes/8)
				}
				g = vals[:t.bytes/8]
				_, err = io.ReadFull(c, float64Bytes(g))
			} else {
				raw = grow(raw, int(n))
				if _, err = io.ReadFull(c, raw); err == nil {
					if len(vals) < t.bytes/8 {
						vals = make([]float64, t.bytes/8)
					}
					g = vals[:t.bytes/8]
					readValues(g, raw, wire)
				}
			}
			if err != nil {
				s.handlers.Leave()
				return
			}
			s.push(t, g, worker, int(n))
			s.handlers.Leave()
			if s.dataAnswer(c, dataOK, 0, nil) != nil {
				return
			}
			continue
		}
		ok, err := s.clocks.await(worker, min(max(wait, 0), srvMaxWait), s.stopping, s.onWait)
		if err != nil {
			s.handlers.Leave()
			s.dataAnswer(c, dataError, 0, []byte(fmt.Sprintf("%v: server %d is stopping", ErrStopped, s.cfg.Index)))
			return
		}
		if !ok {
			s.handlers.Leave()
			if s.dataAnswer(c, dataNotReady, 0, nil) != nil {
				return
			}
			continue
		}
		raw = s.values(t, raw[:0], wire)
		step := s.pushes.Load()
		s.served.pulled(worker, len(raw), step)
		s.handlers.Leave()
		if s.dataAnswer(c, dataOK, step, raw) != nil {
			return
		}
	}
}

// dataAnswer writes one answer.
func (s *Server) dataAnswer(c net.Conn, status byte, step int64, payload []byte) error {
	if status == dataError && len(payload) > dataMaxError {
		payload = payload[:dataMaxError]
	}
	var hdr [dataHeader]byte
	hdr[0] = status
	binary.LittleEndian.PutUint64(hdr[8:], uint64(step))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(len(payload)))
	c.SetWriteDeadline(time.Now().Add(dataPayloadTimeout))
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(c)
	return err
}

// grow returns b resliced to n bytes, reallocated when too short.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// dataLink is a client's data link to one server; nil fields until set up.
type dataLink struct {
	mu   sync.Mutex
	conn net.Conn // nil: none (not set up, or broken: the client uses gorpc)
	raw  []byte   // float32 wire: the bytes of a Push or a Pull
	hdr  [dataHeader]byte
}

// setupData dials server sc's data link; on failure the client goes on
// over gorpc, and says so once.
func (sc *srvConn) setupData(ctx context.Context) {
	d := net.Dialer{Timeout: srvHandshakeTimeout, KeepAlive: 15 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", sc.addr)
	if err == nil {
		var stream net.Conn
		var hello []byte
		stream, hello, err = sc.guard.Client(conn, []byte(srvHelloData), time.Now().Add(srvHandshakeTimeout))
		if err == nil && string(hello) != srvHelloServer {
			err = fmt.Errorf("peer speaks %q, not the parameter-server protocol", hello)
		}
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			sc.data.mu.Lock()
			sc.data.conn = stream
			sc.data.mu.Unlock()
			return
		}
		conn.Close()
	}
	sc.c.log.Info("ps: no data link to a parameter server: its Pulls and Pushes go over gorpc", "server", sc.index, "addr", sc.addr, "err", err)
}

// errNoLink says that the data link is not there: use gorpc.
var errNoLink = errors.New("ps: no data link")

// dataCall runs one request on the data link, bounded by ctx and timeout:
// it writes the header and what payload returns (called under the
// link's lock; nil: none), reads the answer's header and hands it
// to read, which consumes the payload. Any failure of the link closes it
// (later calls go over gorpc) and is a *ServerError.
func (sc *srvConn) dataCall(ctx context.Context, timeout time.Duration, op byte, w Wire, wait time.Duration, payload func() net.Buffers,
	read func(c net.Conn, status byte, step int64, n uint64) error) error {
	l := &sc.data
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.conn
	if c == nil {
		return errNoLink
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	stopLife := context.AfterFunc(sc.c.life, func() { c.SetDeadline(time.Now()) })
	defer stopLife()
	var bufs net.Buffers
	if payload != nil {
		bufs = payload()
	}
	var n uint64
	for _, b := range bufs {
		n += uint64(len(b))
	}
	hdr := l.hdr[:]
	clear(hdr)
	hdr[0], hdr[1] = op, byte(w)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(int32(sc.c.cfg.WorkerID)))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(wait))
	binary.LittleEndian.PutUint64(hdr[16:], n)
	all := append(net.Buffers{hdr}, bufs...)
	_, err := all.WriteTo(c)
	if err == nil {
		_, err = io.ReadFull(c, hdr)
	}
	if err == nil {
		status := hdr[0]
		step := int64(binary.LittleEndian.Uint64(hdr[8:]))
		m := binary.LittleEndian.Uint64(hdr[16:])
		if status == dataError {
			if m > dataMaxError {
				err = fmt.Errorf("%w: data link: an error message of %d bytes", ErrProtocol, m)
			} else {
				msg := make([]byte, m)
				if _, err = io.ReadFull(c, msg); err == nil {
					sc.closeDataLocked()
					remote := srvDecodeRemote(string(msg))
					if errors.Is(remote, ErrStopped) {
						return sc.fail(remote)
					}
					return fmt.Errorf("ps: parameter server %d (%s) refused: %w", sc.index, sc.addr, remote)
				}
			}
		} else {
			err = read(c, status, step, m)
		}
	}
	if err == nil {
		return nil
	}
	sc.closeDataLocked()
	if sc.c.life.Err() != nil {
		return ErrClosed
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, ErrProtocol) {
		return fmt.Errorf("ps: parameter server %d (%s): %w", sc.index, sc.addr, err)
	}
	return sc.fail(fmt.Errorf("%w: data link: %w", ErrUnreachable, err))
}

// closeDataLocked closes the data link; the caller holds sc.data.mu.
func (sc *srvConn) closeDataLocked() {
	if sc.data.conn != nil {
		sc.data.conn.Close()
		sc.data.conn = nil
	}
}

// closeData closes the data link (Close).
func (sc *srvConn) closeData() {
	sc.data.mu.Lock()
	defer sc.data.mu.Unlock()
	sc.closeDataLocked()
}

// dataPull is one Pull from sc over its data link (errNoLink: there is
// none). ready is false when the staleness bound held it: ask again.
// float64 values are read straight into out's slices.
func (c *Client) dataPull(ctx context.Context, sc *srvConn, l *clientLayout, out [][]float64) (step int64, ready bool, err error) {
	wait := srvPollWait
	if dl, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(dl)), 0)
	}
	w := c.cfg.Wire
	want := uint64(l.bytes[sc.index] / 8 * w.size())
	err = sc.dataCall(ctx, wait+c.cfg.CallTimeout, dataPull, w, wait, nil, func(conn net.Conn, status byte, s int64, n uint64) error {
		switch {
		case status == dataNotReady:
			return nil
		case status != dataOK:
			return fmt.Errorf("%w: data link: status %d", ErrProtocol, status)
		case n != want:
			return fmt.Errorf("%w: Pull: answered %d bytes, want %d", ErrProtocol, n, want)
		}
		step, ready = s, true
		if w == WireFloat64 && hostLittle {
			for _, ref := range l.refs[sc.index] {
				if _, err := io.ReadFull(conn, float64Bytes(out[ref.v][ref.off:ref.off+ref.n])); err != nil {
					return err
				}
			}
			return nil
		}
		sc.data.raw = grow(sc.data.raw, int(n))
		if _, err := io.ReadFull(conn, sc.data.raw); err != nil {
			return err
		}
		off := 0
		for _, ref := range l.refs[sc.index] {
			readValues(out[ref.v][ref.off:ref.off+ref.n], sc.data.raw[off:], w)
			off += w.size() * ref.n
		}
		return nil
	})
	return step, ready, err
}

// dataPush is one Push to sc over its data link (errNoLink: there is
// none). float64 gradients are written from in's slices themselves.
func (c *Client) dataPush(ctx context.Context, sc *srvConn, l *clientLayout, in [][]float64) error {
	w := c.cfg.Wire
	bufs := func() net.Buffers {
		if w == WireFloat64 && hostLittle {
			var b net.Buffers
			for _, ref := range l.refs[sc.index] {
				b = append(b, float64Bytes(in[ref.v][ref.off:ref.off+ref.n]))
			}
			return b
		}
		sc.data.raw = l.gather(sc.data.raw[:0], sc.index, in, w)
		return net.Buffers{sc.data.raw}
	}
	return sc.dataCall(ctx, c.cfg.CallTimeout, dataPush, w, 0, bufs, func(_ net.Conn, status byte, _ int64, n uint64) error {
		if status != dataOK || n != 0 {
			return fmt.Errorf("%w: data link: Push answered status %d with %d bytes", ErrProtocol, status, n)
		}
		return nil
	})
}
