package ps

import (
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/valyala/gorpc"
)

// Protocol identifiers bound into the handshake, so that a rendezvous,
// coordinator or data-plane peer cannot be mistaken for a parameter
// server's.
const (
	srvHelloClient = "gorovod-ps-client/1"
	srvHelloServer = "gorovod-ps-server/1"
	srvServiceName = "ParameterServer"
)

// Limits on what a server accepts. A server checks every request against
// them and against the layout Create gave it before it allocates anything
// from the request's sizes.
const (
	// MaxServerBytes bounds the values one server holds (128 Mi float64):
	// one Pull or Push carries all of a server's values in one message.
	MaxServerBytes = 1 << 30
	// srvMaxMessage bounds one gorpc message in either direction: a
	// server's values plus the layout's metadata. A peer that announces a
	// longer one loses its connection before anything is read.
	srvMaxMessage = MaxServerBytes + 16<<20
	// Bounds on a layout's metadata.
	srvMaxVars    = 1 << 14
	srvMaxNameLen = 256
	srvMaxDims    = 16
	srvMaxShards  = 1 << 16
	// srvMaxWorkerID bounds the worker ids a server keeps a clock for.
	srvMaxWorkerID = 1 << 16
	// srvMaxWait bounds how long a server holds one Pull that waits for
	// the staleness bound; the client asks again until its context ends.
	srvMaxWait = 5 * time.Second
	// srvPollWait is how long a client asks a server to hold such a Pull.
	srvPollWait = time.Second
)

// srvRPCPending and srvRPCBuffer size each gorpc connection's queue of
// calls in flight and its read and write buffers, at both ends. A client
// has a few calls in flight per server at most (a Pull or Push per
// goroutine using it); buffers are larger than the rendezvous's because
// every Pull and Push carries a server's share of the model.
const (
	srvRPCPending = 64
	srvRPCBuffer  = 64 << 10
)

// Wire types, carried by gob inside gorpc's dispatcher envelope. Values
// travel as raw little-endian float64 bytes: a server's shards in layout
// order (variables in Create's order, each one's shards in row order),
// concatenated.
type (
	srvShardWire struct {
		Start, End int // rows [Start, End)
		Server     int
	}
	srvVarWire struct {
		Name   string
		Shape  []int
		Shards []srvShardWire
	}
	srvLayoutWire struct {
		Servers int
		Vars    []srvVarWire
	}
	srvCreateReq struct {
		Index  int // the server the client believes it calls
		Layout srvLayoutWire
		Opt    Optimizer
		Values []byte
	}
	srvLayoutReq struct {
		Wait time.Duration // how long the server may wait for Create
	}
	srvLayoutResp struct {
		Index  int
		Ready  bool
		Layout srvLayoutWire
		Opt    Optimizer
	}
	srvPullReq struct {
		Worker int           // -1: not a worker (no clock)
		Wait   time.Duration // how long the server may hold the call for the staleness bound
		Wire   Wire          // how the answer carries the values
	}
	srvPullResp struct {
		Ready  bool // false: the staleness bound still holds the caller back; ask again
		Step   int64
		Values []byte
	}
	srvPushReq struct {
		Worker int
		Wire   Wire // how Grads carries the gradient
		Grads  []byte
	}
	srvLoadReq struct {
		Values []byte
		Step   int64
	}
	srvWorkerReq struct {
		Worker int
	}
)

// srvDispatcherMu serialises gorpc.Dispatcher construction, the servers'
// and the coordinator's: AddService validates types through an unguarded
// package-level slice inside gorpc.
// srvClientDispatcher is built at package initialisation, before any
// goroutine runs, so that every type of this service is validated once
// and later constructions only read that slice.
var (
	srvDispatcherMu     sync.Mutex
	srvClientDispatcher = newSrvDispatcher(nil)
)

// newSrvDispatcher builds the dispatcher of the parameter-server service.
// Clients pass a nil *srvService: they need only the method table and the
// gob registrations AddService performs.
func newSrvDispatcher(svc *srvService) *gorpc.Dispatcher {
	srvDispatcherMu.Lock()
	defer srvDispatcherMu.Unlock()
	for _, v := range []any{&srvCreateReq{}, &srvLayoutReq{}, &srvLayoutResp{}, &srvPullReq{}, &srvPullResp{}, &srvPushReq{}, &srvLoadReq{}, &srvWorkerReq{}} {
		gorpc.RegisterType(v)
	}
	d := gorpc.NewDispatcher()
	d.AddService(srvServiceName, svc)
	return d
}

// srvFrameConn bounds the gob messages read from a connection: it follows
// gob's framing (each message is preceded by its length, a gob unsigned
// integer) and fails the read that announces a message longer than limit,
// so the decoder never starts on it. On the server it also checks gorpc's
// first byte, the compression flag: compressed streams are refused (the
// framing could not be followed, and clients never compress).
type srvFrameConn struct {
	net.Conn
	limit int64

	state   int   // srvFrameFlag, srvFrameCount, srvFrameCountMore or srvFrameBody
	pending int   // count bytes still to read (srvFrameCountMore)
	value   int64 // the count read so far, then the body bytes left
}

const (
	srvFrameFlag = iota
	srvFrameCount
	srvFrameCountMore
	srvFrameBody
)

func newSrvFrameConn(c net.Conn, limit int64, server bool) *srvFrameConn {
	f := &srvFrameConn{Conn: c, limit: limit, state: srvFrameCount}
	if server {
		f.state = srvFrameFlag
	}
	return f
}

// Read reads from the connection and checks the framing of what it read.
func (f *srvFrameConn) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if n > 0 {
		if ferr := f.scan(p[:n]); ferr != nil {
			return 0, ferr
		}
	}
	return n, err
}

func (f *srvFrameConn) scan(b []byte) error {
	for len(b) > 0 {
		switch f.state {
		case srvFrameFlag:
			if b[0] != 0 {
				return fmt.Errorf("%w: compressed gorpc stream refused", ErrBadRequest)
			}
			b = b[1:]
			f.state = srvFrameCount
		case srvFrameCount:
			c := b[0]
			b = b[1:]
			if c < 0x80 {
				if err := f.startBody(int64(c)); err != nil {
					return err
				}
				continue
			}
			f.pending = 256 - int(c) // gob: the byte count, negated
			if f.pending > 8 {
				return fmt.Errorf("%w: malformed gob message length", ErrBadRequest)
			}
			f.value = 0
			f.state = srvFrameCountMore
		case srvFrameCountMore:
			if f.value > math.MaxInt64>>8 {
				return fmt.Errorf("%w: gob message length overflows", ErrBadRequest)
			}
			f.value = f.value<<8 | int64(b[0])
			b = b[1:]
			f.pending--
			if f.pending == 0 {
				if err := f.startBody(f.value); err != nil {
					return err
				}
			}
		case srvFrameBody:
			k := int64(len(b))
			if k > f.value {
				k = f.value
			}
			b = b[k:]
			f.value -= k
			if f.value == 0 {
				f.state = srvFrameCount
			}
		}
	}
	return nil
}

func (f *srvFrameConn) startBody(n int64) error {
	if n > f.limit {
		return fmt.Errorf("%w: message of %d bytes exceeds the limit of %d", ErrBadRequest, n, f.limit)
	}
	f.value = n
	f.state = srvFrameBody
	if n == 0 {
		f.state = srvFrameCount
	}
	return nil
}

// srvListener adapts a net.Listener that is already listening to gorpc's
// Listener.
type srvListener struct{ l net.Listener }

func (s srvListener) Init(string) error    { return nil }
func (s srvListener) Close() error         { return s.l.Close() }
func (s srvListener) ListenAddr() net.Addr { return s.l.Addr() }
func (s srvListener) Accept() (io.ReadWriteCloser, string, error) {
	c, err := s.l.Accept()
	if err != nil {
		return nil, "", err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(15 * time.Second)
	}
	return c, c.RemoteAddr().String(), nil
}
