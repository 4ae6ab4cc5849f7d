package rendezvous

import (
	"sync"
	"time"

	"github.com/valyala/gorpc"
)

// Peer is one row of the peer table: a rank, the host it runs on and the
// data-plane address it listens on, and the machine whose processors it
// runs on where the rank said (jobenv.MachineID; empty otherwise).
type Peer struct {
	Rank    int
	Host    string
	Addr    string
	Machine string
}

// Limits on what one call may carry.
const (
	// MaxKeyLen bounds a key-value store key, in bytes.
	MaxKeyLen = 256
	// MaxValueLen bounds a key-value store value, in bytes.
	MaxValueLen = 1 << 20
	// MaxMachineLen bounds a Peer's Machine, in bytes.
	MaxMachineLen = 128
	// MaxWait bounds how long the server holds one blocking call (PeerTable,
	// Get) before answering "not yet"; clients ask again.
	MaxWait = 5 * time.Second
)

// Protocol identifiers bound into the handshake, so that a data-plane or
// coordinator peer cannot be mistaken for a rendezvous peer.
const (
	helloClient = "gorovod-rendezvous-client/1"
	helloServer = "gorovod-rendezvous-server/1"
	serviceName = "Rendezvous"
)

// Wire types, carried by gob inside gorpc's dispatcher envelope.
type (
	registerReq struct { // Register and Leave (which ignores Host and Machine)
		Rank    int
		Host    string
		Addr    string
		Machine string // empty from a client that does not say (or predates it)
	}
	waitReq struct {
		Key  string        // KV key; empty for PeerTable
		Wait time.Duration // how long the server may hold the call
		// Rank and Addr are the caller's registration, for PeerTable: the
		// table answered is that of its round. An empty Addr (a caller that
		// never registered, or an older client) asks for the current round.
		Rank int
		Addr string
	}
	tableResp struct {
		Ready bool
		Peers []Peer
	}
	missingResp struct {
		Missing []Peer
	}
	setReq struct {
		Key   string
		Value []byte
	}
	getResp struct {
		Found bool
		Value []byte
	}
)

// dispatcherMu serialises gorpc.Dispatcher construction: AddService
// validates types through an unguarded package-level slice inside gorpc, so
// two servers or clients built at once would race on it.
var dispatcherMu sync.Mutex

// newDispatcher builds the dispatcher for the rendezvous service. Clients
// pass a nil *service: they only need the method table and the gob type
// registrations that AddService performs.
func newDispatcher(svc *service) *gorpc.Dispatcher {
	dispatcherMu.Lock()
	defer dispatcherMu.Unlock()
	for _, v := range []any{&registerReq{}, &waitReq{}, &tableResp{}, &missingResp{}, &setReq{}, &getResp{}, &metricsReq{}} {
		gorpc.RegisterType(v)
	}
	d := gorpc.NewDispatcher()
	d.AddService(serviceName, svc)
	return d
}
