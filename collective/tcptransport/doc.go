// Package tcptransport is gorovod's data plane: a collective.Transport made
// of one TCP connection per pair of ranks.
//
// # Mesh formation
//
// Every rank opens a Listener, publishes its address (through the
// rendezvous), and calls Connect with the addresses of all ranks. Rank i
// dials every rank j < i, retrying with back-off while its context lasts,
// and accepts a connection from every rank j > i. Connect returns when it
// holds one authenticated connection per peer; it then closes the
// listener, so nothing more is accepted. If the context ends first, Connect
// closes everything it opened and returns an error that names the ranks
// that never connected (with the last dial error for each lower rank).
// LocalMesh does all of this in one process over 127.0.0.1.
//
// # Handshake
//
// Each connection starts with internal/auth's mutual HMAC-SHA256
// challenge–response over the 32-byte job secret. Each side binds the hello
// "gorovod-data rank=R size=N" into its proof, so no one can claim a rank
// without knowing the secret. The accepting side then checks the claim (a
// rank above its own, the job's size, not already connected) and answers
// with a one-byte acknowledgement; the dialing side checks that it reached
// the rank it meant to and waits for that byte. The whole exchange runs
// under Config.HandshakeTimeout, and every accepted connection handshakes on
// its own goroutine, so a silent intruder cannot hold up a real peer. A
// connection that fails any step (wrong secret, garbage bytes, silence past
// the deadline, a rank out of range, a duplicate rank, a size mismatch) is
// closed and logged at Warn with its remote address and the reason, and
// formation goes on.
//
// # Framing
//
// Each message is one frame: a 24-byte header followed by the payload.
//
//	offset size field
//	0      2    magic "GV"
//	2      1    version (1)
//	3      1    reserved, zero
//	4      4    Step   (little-endian)
//	8      8    Seq    (little-endian)
//	16     8    Len    (little-endian): payload bytes that follow
//
// Send writes the header and the caller's slice with one vectored write
// (writev through net.Buffers); the payload is never copied. Recv reads the
// header, compares Seq, Step and Len with the tag it expects and len(p), and
// then reads the payload straight into p. A 16 KiB read buffer lets one
// syscall fetch a header together with a small payload; payloads larger
// than the buffer bypass it. TCP_NODELAY is on; socket buffers are left to
// Linux's autotuning, which measured faster than fixed 4 MiB buffers on
// loopback.
//
// # Failures
//
// Every failure fails its link for good: later calls on the Conn return the
// first cause at once. A frame whose header is malformed or whose tag or
// length differs from what Recv expects is an error wrapping
// collective.ErrProtocol that states both. EOF, reset or broken pipe from
// the peer wrap collective.ErrPeerGone and name the peer's rank and
// address. A Send or Recv whose context ends while it is on the wire fails
// with the context's error (and collective.ErrTimeout for a deadline); the
// stream position is then unknown, so the link is failed too. (A context
// that ended before the call fails only that call: no byte moved.) Watching
// a context costs one context.AfterFunc per call, nothing if it can never
// end. The first
// failure of a link closes its socket, so the peer learns at once. Close
// closes every socket: pending and later calls fail with
// collective.ErrClosed and peers see collective.ErrPeerGone.
//
// At most one Send and one Recv may be in progress on a Conn at a time; they
// share no locks. A Transport runs no goroutines of its own.
package tcptransport
