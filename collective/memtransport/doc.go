// Package memtransport is an in-memory collective.Transport: a full mesh of
// links between ranks that share one process.
//
// It has two users. Tests run whole jobs of several ranks on it, with the
// fault hooks below. And a job of one rank runs on it in production:
// hvd.NewRuntime gives such a job, when it brings no transport of its own,
// the one rank of NewNetwork(1), which has no link at all, so that the
// rank joins no rendezvous round and opens no data-plane socket, while
// every collective still runs through the same Comm and engine as in a
// larger job. Its behaviour is therefore a contract like tcptransport's, not a
// test double's: what it promises below holds for both users.
//
// A Network holds the links; each rank's Transport is one end of every link.
// Send copies the message into the receiver's queue and returns at once, so
// one goroutine may Send and then Recv on the same link without deadlock,
// and the caller may reuse its buffer. Recv waits for the next message and
// checks its tag and length like a real transport does.
//
// # Failures
//
// Every error a Conn returns is sticky: later calls on that Conn fail with
// the same cause (after delivering what a departed peer had already sent,
// see below). This includes a call cut short by its context, because a
// stream transport cannot tell how much of a frame was transferred and must
// give the link up; the memory transport behaves the same way so that code
// tested on it does not come to rely on more.
//
//   - Close ends every pending and later call on the transport with an
//     error wrapping collective.ErrClosed.
//   - When one end of a link closes or fails, the other end still receives
//     the messages already queued for it (like TCP data before a FIN); then
//     its Recv returns collective.ErrPeerGone. Its Send fails with
//     ErrPeerGone at once.
//   - A frame with another tag or length fails the link with an error
//     wrapping collective.ErrProtocol that states what was expected and what
//     came.
//
// # Fault hooks
//
// Tests inject faults with Network.BreakLink (the link dies, queued data is
// lost), Network.DropPeer (a rank's process dies), Network.SetDelay (a link
// becomes slow), and the options FailAfter and RandomFault (the link that
// carries the n-th message dies, with n fixed or drawn from a seed). The
// network starts no goroutines, so closing every transport leaves nothing
// behind.
package memtransport
