package collective

import "context"

// Tag labels every message on a link. Seq numbers the collective operation
// (the same on every rank); Step numbers the message inside that operation.
// A receiver states the tag it expects and a frame carrying any other tag is
// a protocol error (ErrProtocol), never silently skipped.
type Tag struct {
	Seq  uint64
	Step uint32
}

// Conn is an ordered, reliable link to one peer. Send and Recv may be called
// concurrently with each other, but at most one Send and one Recv may be in
// progress at a time on one Conn.
type Conn interface {
	// Send transmits p under tag. When Send returns, p may be reused.
	Send(ctx context.Context, tag Tag, p []byte) error
	// Recv fills p exactly with the next message, which must carry tag and
	// have length len(p); anything else is an error wrapping ErrProtocol.
	Recv(ctx context.Context, tag Tag, p []byte) error
}

// Buffered is implemented by Conns that can promise how much a Send may
// leave unreceived: as long as the frames sent on the link and not yet
// received hold at most Buffered(n) payload bytes in n messages, each Send
// returns without waiting for the peer. 0 promises nothing. When every
// link a plan sends on buffers twice what the plan sends on it (or, for
// an all-reduce of two ranks, two of its messages; for a ring among more,
// what a rank can run ahead, on links also Backlogged), the communicator
// runs the plan step by step in the caller's goroutine instead of
// pipelining it over three (see Comm.inline).
type Buffered interface {
	Buffered(messages int) int
}

// Rendezvous is implemented by Conns that can move a large message with
// fewer copies when its sender may wait for the receiver: SendWait is
// Send, except that it may not return before the peer's matching Recv has
// taken p (a shared-memory link lets the receiver copy p straight from
// the sender's memory). It makes no promise of Buffered's kind. The
// pipelined executor, whose sending and receiving run in goroutines of
// their own, sends with it; a plan run inline, which sends before it
// receives, never does.
type Rendezvous interface {
	SendWait(ctx context.Context, tag Tag, p []byte) error
}

// InPlace is implemented by Rendezvous Conns that can say whether
// SendWait would leave a message of n bytes in the sender's memory for
// the receiver to copy (a shared-memory link with remote frames on).
// Only the pipelined executor sends with SendWait, so an all-reduce of two
// ranks whose messages would go so runs pipelined rather than inline.
type InPlace interface {
	SendsInPlace(n int) bool
}

// Backlogged is implemented by Buffered Conns that can tell how many
// bytes they hold that this rank has sent and the peer has not received
// yet (frames' headers included). It is asked between operations, by the
// goroutine that sends: a ring all-reduce among more than two ranks runs
// inline only on links that hold nothing of earlier operations (see
// Comm.ringBuffers).
type Backlogged interface {
	Backlog() int
}

// Exchanger is implemented by Conns that can move two messages at once in
// the calling goroutine: Exchange sends the concatenation of p's pieces
// under tag on this Conn while it receives the message under rtag from
// the Conn from into q's pieces, in order, exactly as a SendVec and a
// RecvVec running concurrently would (see Vectored), and returns once both
// are done or either has failed (sendErr and recvErr say which). A
// direction left unfinished by the other's failure fails too, with its
// link's cause (one wrapping ErrClosed if its link had not failed
// already). arrived, if not nil, is called after reads with how many bytes
// of q have been filled, all pieces together, so that the caller can use
// the front of q while the rest arrives; it must not touch the links.
// CanExchange reports whether Exchange works with from (say, both links
// run over the same kind of socket); Exchange must only be called where it
// does.
//
// The communicator runs ring all-reduces step by step over such links,
// fused batches (AllreduceVec) included, without the pipelined executor's
// goroutine hand-offs (see Comm.execute).
type Exchanger interface {
	CanExchange(from Conn) bool
	Exchange(ctx context.Context, tag Tag, p [][]byte, from Conn, rtag Tag, q [][]byte, arrived func(n int)) (sendErr, recvErr error)
}

// ReduceReceiver is implemented by Conns that may fold a message into a
// buffer as it arrives, without first copying it whole into a buffer of
// their own (a shared-memory link reduces straight from its ring).
// ReducesOnArrival reports whether the link does so now; where it does
// not, a caller gains nothing from RecvReduce. RecvReduce receives the
// message under tag, of len(dst) bytes (a multiple of esz), and folds it
// into dst, calling reduce on runs of whole elements of esz bytes, in
// order; a src it passes may not be aligned to esz.
type ReduceReceiver interface {
	ReducesOnArrival() bool
	RecvReduce(ctx context.Context, tag Tag, dst []byte, esz int, reduce func(dst, src []byte)) error
}

// Transport is a full mesh of Conns between the ranks of one job.
//
// Failures are sticky: after a Conn fails (peer gone, bad frame, deadline),
// every later call on it fails with the same cause. Close unblocks every
// pending Send and Recv with an error wrapping ErrClosed, and peers observe
// the closed links (ErrPeerGone) promptly.
type Transport interface {
	Rank() int
	Size() int
	// Conn returns the link to peer (0 <= peer < Size, peer != Rank).
	Conn(peer int) Conn
	// Host returns a printable address of peer for error messages.
	Host(peer int) string
	Close() error
}
