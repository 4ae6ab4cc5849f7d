// Package tcptransport is gorovod's data plane: a collective.Transport
// whose links between ranks are TCP connections, two per pair of ranks.
// Every link is formed, authenticated and watched over TCP; where both
// ranks are on one host, the link then carries its frames through a
// shared-memory ring per direction instead (package shm), and its sockets
// stay open only to tell either side when the other goes away.
// Either way the frames, their checks and the failures they report are the
// same, and a link's path is chosen once, when the link forms.
//
// # Mesh formation
//
// Every rank opens a Listener, publishes its address (through the
// rendezvous), and calls Connect with the addresses of all ranks and the
// peers whose links it wants at once (Config.Eager; all by default). The link
// between two ranks is two sockets, one per direction (a lane): each
// carries frames one way only, so a Send and a Recv in progress on a link
// never contend for a socket (the kernel serialises the calls on one
// socket). Rank i dials both lanes to every rank j < i, retrying with
// back-off while its context lasts, and accepts both lanes from every rank
// j > i. Connect returns when it holds every lane of every eager link; with
// the full mesh it then closes the listener, so nothing more is accepted.
// If the context ends
// first, Connect closes everything it opened and returns an error that
// names the ranks whose links never formed (with the last dial error for
// each lower rank). LocalMesh does all of this in one process over
// 127.0.0.1.
//
// # Links on demand
//
// A full mesh costs every rank size-1 links (two sockets each, and two
// shared-memory rings to a peer on its host), whether or not they ever
// carry a byte: at 64 ranks on one host, 126 sockets and 16 GiB of rings
// for the job. With Config.Eager listing the peers the schedules use
// (collective.SchedulePeers: about 2 log2 size), only those links form
// with the mesh; the transport keeps accepting, and each other link forms
// the first time either end sends, receives or asks Buffered on it. The
// higher rank of the pair dials the link's lanes as above; a lower rank
// that needs the link first connects to the higher one and asks for that
// dial ("gorovod-data rank=R size=N call", authenticated and acknowledged
// like a lane, then closed). Both ends then run the shared-memory
// handshake of that link on their own goroutines, so a link forms whatever
// the other end is doing. A call that waits for a link ends with its
// context (an error naming both ranks and the peer's address) or with
// Close (collective.ErrClosed). Until a link has formed, Buffered promises
// nothing, so operations over it are pipelined and a Send waiting for the
// link never holds up the caller's other links.
//
// # Handshake
//
// Each connection starts with internal/auth's mutual HMAC-SHA256
// challenge–response over the 32-byte job secret. Each side binds its hello
// into its proof: the accepting side's is "gorovod-data rank=R size=N", the
// dialing side's also names the lane it opens, as "... lane=F>T" (frames go
// from rank F to rank T), so no one can claim a rank or a lane without
// knowing the secret. The accepting side then checks the claim (a rank
// above its own, the job's size, a lane between the two ranks, not already
// connected) and answers with a one-byte acknowledgement; the dialing side
// checks that it reached the rank it meant to and waits for that byte. The
// whole exchange runs under Config.HandshakeTimeout, counted from the
// connection's accept, and every accepted connection handshakes on its own
// goroutine, so a silent intruder cannot hold up a real peer. A Listener
// accepts from Listen on, so no connection waits in the kernel's backlog
// while its rank is still at the rendezvous: until Connect it holds at most
// 1024 connections (closing any beyond), each for at most
// DefaultHandshakeTimeout, and Connect then handshakes on those it still
// holds. A connection that fails any step (wrong secret,
// garbage bytes, silence past the deadline, a rank out of range, a
// malformed or foreign lane, a duplicate lane, a size mismatch) is closed
// and formation goes on. The first such connection from each remote host is
// logged at Warn with its address and the reason; later ones from that host
// are logged at Debug and counted, and the count is logged at Warn
// ("rejected more connections", with the last address and reason) at most
// every 10 seconds and once more when formation ends, so a port scanner or
// a misdirected client that retries cannot flood the log.
//
// # TLS
//
// With Config.TLS every connection runs that handshake inside a TLS 1.3
// session (auth.Guard: a key derived from the job secret on both sides,
// each requiring the other's certificate of it, and the HMAC bound to the
// session by exported keying material), and a link on TCP sends its frames
// through its two sessions: a frame's header and the start of its payload
// go out in one record, the rest of a large payload straight from the
// caller's buffer, the records of a frame in few socket writes, and reads
// of small frames poll the socket first, as on a plain link.
// The shared-memory handshake runs inside the sessions too; the rings do
// not, since they never leave the host. A rank that meets a peer of the
// other kind fails that connection with an error saying so
// (auth.ErrMismatch), and Connect's error names the last rejected
// connection, so both sides say why the mesh did not form.
//
// # Shared memory between ranks on one host
//
// Right after formation, every link whose lanes have both formed to a peer
// whose address has this rank's host part runs package shm's handshake
// over its authenticated lanes (see offerShm): the two ranks offer each
// other a ring for their outbound direction, in an anonymous memory file
// that never has a name in any directory, so that no kill can leave one
// behind. When both directions were accepted, the link's frames travel
// through the rings instead of the sockets (same frames, same checks; the
// conn's link is a shm.Link), and the sockets stay open and idle as the
// liveness signal: a peer that exits, crashes or closes its transport
// closes them, frames it had written are still delivered, and then the
// link fails with collective.ErrPeerGone. Where a ring cannot be made or
// the peer's cannot be opened (no memory, another pid namespace, another
// user), the link stays on TCP, and the rank logs one Warn line that names
// every such peer and the cause. A handshake that cannot finish (a read or
// write of it fails: the peer went away, or Config.HandshakeTimeout passed)
// leaves the link's streams at an unknown place, so that link is failed
// before it carries a frame (collective.ErrTimeout or ErrPeerGone, naming
// the handshake). Config.NoSharedMemory (gorun --no-shared-memory) keeps
// every link on TCP.
//
// Each rank creates at most 16 MiB of rings (shm.BudgetBytes), however
// many ranks share its host: the eager links share 12 MiB, links formed on
// demand get smaller rings from what is left, and once not even 64 KiB
// fits, a link stays on TCP (logged at Debug: that is by design). Package
// shm says how it is shared out and why.
//
// # Framing
//
// Each message is one frame (package internal/frame): a 24-byte header
// followed by the payload.
//
//	offset size field
//	0      2    magic "GV"
//	2      1    version (1)
//	3      1    flags: zero (1 marks a shared-memory link's remote frame)
//	4      4    Step   (little-endian)
//	8      8    Seq    (little-endian)
//	16     8    Len    (little-endian): payload bytes that follow
//
// Send writes the header and the caller's slice with one vectored write
// (writev through net.Buffers); the payload is never copied. Recv checks
// the header's Seq, Step and Len against the tag it expects and len(p). Its
// reads are vectored too: each readv(2) fills the rest of what Recv wants
// first and puts whatever the stream holds beyond it (the next header, a
// whole small frame) in a 16 KiB read buffer. A header that came with the
// previous frame costs no syscall, and a payload is copied only for the
// bytes that overshot into the buffer. TCP_NODELAY is on; socket buffers
// are left to Linux's autotuning, which measured faster than fixed 4 MiB
// buffers on loopback.
//
// # Busy-polling
//
// A Recv of at most 64 KiB polls its non-blocking socket (yielding the
// processor to runnable goroutines between attempts) for up to 200 µs
// before it parks on the netpoller: parking and waking a thread, and on a
// virtual machine waking an idle virtual CPU, cost more than a small
// message takes to arrive. Polling is off where it would take processors
// that other ranks need: when the ranks on this host (by the host part of
// their addresses) outnumber its CPUs, or the ranks on its machine do
// (Config.Machines: hosts with addresses of their own on one kernel and
// the same processors, such as network namespaces or containers of one
// node; package hvd fills it in from jobenv.MachineID). A poll that runs
// out of budget does not stop the next one: when a rank parks, its slow
// wake-up makes its peer's poll fail too, and every back-off tried (after
// failures in a row, or while few polls paid) kept ranks parking and made
// the median 4 KiB all-reduce up to twice as slow. The budget is long for the same reason
// (see spinBudget). Close, a peer's failure and a cancelled context end a
// poll as promptly as a parked read. A rank that never polls (more ranks
// than processors, no shared memory) makes its readv and writev raw system
// calls, which do not wake the Go scheduler's monitor thread after every
// park (see tuning.rawIO).
//
// # Congestion control
//
// Data connections whose two ends are on one host use Reno. The common
// default BBR paces its sends with timers on a device without an fq qdisc,
// as loopback is, which held a 64 MiB two-rank all-reduce to 1.7 GB/s and
// nearly doubled its processor time; Reno does not pace, and a same-host
// path has no congestion to control. Connections between hosts use Reno
// too unless Config.Congestion names another (or "host", the host's
// default): between emulated hosts it moved 1-64 MiB 1.4-1.8× faster than
// BBR and 1.2-2.0× faster than CUBIC (see crossHostCongestion).
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
// end. The first failure of a link closes both its sockets, so the peer
// learns at once. Close closes every socket: pending and later calls fail
// with collective.ErrClosed and peers see collective.ErrPeerGone.
//
// At most one Send and one Recv may be in progress on a Conn at a time; they
// share no locks. With a context that cannot end, neither allocates. A
// Transport runs no goroutines of its own.
package tcptransport
