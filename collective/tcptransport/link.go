package tcptransport

import "github.com/gorovod/gorovod/collective"

// cacheLine is the size of a processor cache line. A link keeps what its
// send writes and what its recv writes this far apart, so that a send and a
// recv running at once on two processors do not take the same line from
// each other on every frame.
const cacheLine = 64

// link is the data path of a conn: how its frames travel. The conn checks
// its sticky failure and watches the call's context; the link moves one
// frame (the same frames either way; see frame.go). Each conn gets its link
// once, when the mesh forms (see newConn): a shmLink when the peer is on
// this host and both rings were exchanged, else a tcpLink.
//
// As for the conn, at most one send and one recv run at a time, and they
// share nothing but the conn's failure.
type link interface {
	// send writes one frame: a header for tag and len(p), then p.
	send(tag collective.Tag, p []byte) error
	// recv reads one frame into p, after checking its header against tag
	// and len(p).
	recv(tag collective.Tag, p []byte) error
	// sendVec is send of the parts' concatenation, from where they lie.
	sendVec(tag collective.Tag, parts [][]byte) error
	// recvVec is recv into the parts in order.
	recvVec(tag collective.Tag, parts [][]byte) error
	// down tells the link that its conn has failed for good; the conn has
	// closed its sockets. It is called once.
	down()
	// wait returns once the link holds nothing more (no goroutine, no
	// mapping) after down.
	wait()
}
