package tcptransport

import "github.com/gorovod/gorovod/collective"

// cacheLine is the size of a processor cache line. A tcpLink keeps what
// its send writes and what its recv writes this far apart, so that a send
// and a recv running at once on two processors do not take the same line
// from each other on every frame.
const cacheLine = 64

// link is the data path of a conn: how its frames travel. The conn checks
// its sticky failure and watches the call's context; the link moves one
// frame (the same frames either way; see package internal/frame). Each conn gets its link
// once, when the mesh forms (see newConn): a shm.Link when the peer is on
// this host and both rings were exchanged, else a tcpLink.
//
// As for the conn, at most one send and one recv run at a time, and they
// share nothing but the conn's failure.
type link interface {
	// Send writes one frame: a header for tag and len(p), then p.
	Send(tag collective.Tag, p []byte) error
	// Recv reads one frame into p, after checking its header against tag
	// and len(p).
	Recv(tag collective.Tag, p []byte) error
	// SendVec is Send of the parts' concatenation, from where they lie.
	SendVec(tag collective.Tag, parts [][]byte) error
	// RecvVec is Recv into the parts in order.
	RecvVec(tag collective.Tag, parts [][]byte) error
	// Down tells the link that its conn has failed for good; the conn has
	// closed its sockets. It is called once.
	Down()
	// Wait returns once the link holds nothing more (no goroutine, no
	// mapping) after Down.
	Wait()
}
