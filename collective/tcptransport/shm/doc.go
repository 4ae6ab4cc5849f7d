// Package shm is the shared-memory link of package tcptransport: what
// carries a link's frames between two ranks on one host through a ring per
// direction in shared memory (package internal/shmring), instead of over
// the link's sockets. tcptransport decides which links may (both lanes
// formed and authenticated, the peer's address with this rank's host part,
// Config.NoSharedMemory unset), runs Handshake on them over their lanes,
// and makes each link whose rings were exchanged a Link; this package
// holds everything else about shared memory: the handshake and its
// messages, the rings' budget, the link's data path, the watch for a peer
// that went away, and Check, the probe of whether this process can offer
// rings at all.
//
// # Handshake
//
// Right after the lanes of a link have formed, its two ranks offer each
// other a ring for their outbound direction, over the link's own
// authenticated lanes (inside the TLS sessions when the transport runs
// TLS; the rings themselves never leave the host), and each answers
// whether it could map the other's. The three steps (offer, answer, hear)
// run over all of a rank's same-host links at once, so that no two ranks
// wait for each other's offer. A ring is a byte ring of 64 KiB to 4 MiB
// (the offering rank's choice, see Budget) in an anonymous memory file
// (memfd_create(2)) with a random token in its first page, offered as
// "/proc/<pid>/fd/<fd>" (see internal/shmring). Such a file never has a
// name in any directory, so no kill at any moment (of a rank, or of gorun
// with its ranks) can leave one behind in /dev/shm, and only a process of
// the same user on the same host in the same pid namespace can open it.
// (The alternative, passing the descriptor with SCM_RIGHTS, would need a
// Unix socket and a second authenticated handshake per link.) The
// offering side reserves the file's pages and seals its size before
// offering, so memory that runs short makes the link stay on TCP instead
// of killing a rank with SIGBUS later. A link uses its rings only if both
// directions were accepted. Where a ring cannot be made or the peer's
// cannot be opened (no memory, another pid namespace, another user), the
// link stays on TCP, and the rank logs one Warn line that names every such
// peer and the cause.
//
// # Link
//
// A Link carries the same frames as a TCP link (see internal/frame), with
// the same checks: the sender copies into the ring, the receiver copies
// out (or, receiving a message to reduce, folds it into its buffer where
// it lies in the ring: see RecvReduce), and a side with nothing to do sleeps in futex(2) after polling for
// a while (busy when the host has a processor to spare beyond one per
// rank, else yielding to other processes). The link's sockets stay open
// and idle as the liveness signal: a peer that exits, crashes or closes
// its transport closes them, frames it had written are still delivered,
// and then the link fails with collective.ErrPeerGone. The Link reports
// every failure to its Conn, the connection that owns the sockets and the
// sticky failure.
//
// # Remote frames
//
// A pipelined collective sends with SendWait (collective.Rendezvous),
// which may wait for the receiver. With remote frames on (RemoteMinEnv,
// off by default; see there for why), SendWait leaves a payload of at
// least that size where it lies: the frame it writes into the ring
// carries only the payload's address and an id, flagged remote in its
// header (see package frame), and the receiver copies the payload straight
// into its own buffer with process_vm_readv(2), one copy instead of two.
// A state word in the ring's first page (see shmring.Ring.Post) says
// whether the receiver took the payload, refused it (process_vm_readv is
// not allowed: another user, Yama's ptrace_scope 2 or 3, or 1 for ranks
// that are not each other's ancestors, a seccomp profile without it), or
// the sender withdrew it because its link failed while it waited; only
// one of the three happens. A refusal is the probe: that payload comes
// through the ring after all, the receiver logs it once at Debug, and the
// sender sends no more remote frames. The receiver reads from the pid in
// the offer of the ring (the handshake's, authenticated and, with TLS,
// inside TLS) and holds a pidfd of that process, through which it checks
// after each copy that the pid still names the sender. A sender that
// exits mid-copy makes the read fail (ESRCH, EFAULT) or the check, and the
// link fails with collective.ErrPeerGone; a sender whose link fails while
// it waits is woken within ringNap, withdraws, and returns the failure,
// and the receiver discards what it copied. Remote frames carry no payload
// through any socket, so they need no encryption under TLS: they exist
// only between ranks on one host, as the rings do.
//
// # Budget
//
// Each rank creates at most BudgetBytes (16 MiB) of rings, however many
// ranks share its host. The eager links to peers on the host share 12 MiB:
// 4 MiB rings for up to 3 of them (as with 2 or 4 ranks on a host, whose
// speed this keeps), 1 MiB for up to 12, 512 KiB for up to 24, and so on
// down to 64 KiB. A link formed on demand gets the largest power of two up
// to a quarter of what is left, at least 64 KiB; once not even that fits,
// the link stays on TCP (logged at Debug: that is by design). Rings of
// 1 MiB carried 1 and 16 MiB all-reduces between 2 and 4 ranks as fast as
// 4 MiB ones on the 2-core test machine; 512 KiB and 256 KiB were slower.
package shm
