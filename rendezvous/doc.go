// Package rendezvous is gorovod's control-plane rendezvous: the launcher
// (gorun) runs a Server, and every rank is a Client that registers its
// data-plane address and reads back the table of all peers.
//
// # Transport and security
//
// The service runs on github.com/valyala/gorpc over TCP, without
// compression. Every connection starts with the mutual HMAC-SHA256
// challenge–response of internal/auth over the 32-byte job secret, inside
// gorpc's OnConnect hook and under a deadline, before gorpc reads a byte.
// Each side binds a protocol name into its proof
// ("gorovod-rendezvous-client/1", "gorovod-rendezvous-server/1"), so a
// data-plane peer cannot talk to the rendezvous by mistake. The server drops a peer that fails, logging only
// its remote address; the secret never appears in logs or errors. Server
// Stop closes connections still inside the handshake, so a silent peer
// cannot hold it. A silent peer is dropped at the handshake deadline
// (ServerConfig.HandshakeTimeout), and at most 2×Size+256 connections are
// inside the handshake at once: the server closes one more as soon as it
// accepts it, logging the first such refusal at Warn. The client dials
// with back-off (50 ms doubling to 1 s), never in a tight loop, and counts
// towards giving up (a wrong secret) only the handshakes in which the
// server spoke, not such refusals. With ServerConfig.TLS and WithTLS the
// handshake and every call after it run inside TLS 1.3 (auth.Guard); a
// client and a server that disagree fail the handshake with an error
// naming the mismatch, and Dial returns it without waiting for its deadline.
//
// # Calls
//
// All calls go through a gorpc Dispatcher service named "Rendezvous":
//
//	Register(rank, host, addr,   record a rank; same address again is a no-op,
//	         machine)            another address for the rank is ErrConflict
//	                             unless the rank left (see Rounds); machine
//	                             (at most MaxMachineLen bytes, may be empty:
//	                             Client.Register sends none, RegisterPeer
//	                             its Peer's) is returned in every table
//	Leave(rank, addr)            the rank's runtime at addr shut down
//	PeerTable(rank, addr, wait) → ready, []Peer
//	                             held by the server until all Size ranks
//	                             registered in the caller's round, or up to
//	                             wait (≤ MaxWait)
//	Missing() → []Peer           ranks not registered in the current round
//	                             yet, with planned hosts
//	Set(key, value)              small key-value store (coordinator address,
//	Get(key, wait) → found, value   small broadcasts); Get is held like PeerTable
//	Ping()                       heartbeat
//
// Blocking calls are bounded where they wait: a client asks with a short
// wait (500 ms) and asks again until its context ends, so a server never
// holds a call for a client that gave up. When the context ends,
// Client.PeerTable asks Missing and fails with a *MissingError such as
// "rendezvous: ranks 2 (host b), 3 (host b) never registered within 30s".
//
// # Rounds
//
// A process may shut its runtime down and join the job again (hvd.Init
// after hvd.Shutdown, on every rank). Each such formation of the mesh is a
// round. Round 1 is complete once every rank registered; a rank whose
// runtime shut down leaves (Client.Leave), and its next registration, from
// its new runtime's address, starts round 2 (or joins it). PeerTable
// answers the table of the caller's own round, so a rank that comes back
// early waits for every rank's new address instead of reading the old
// ones, and a rank slow to read round 1's table still gets it. A
// registration from a new address for a rank that has not left stays a
// conflict: two processes claim the rank. A server made with SingleRound
// (rank 0's, in a job that gorun did not start, which serves only until
// its mesh forms) answers ErrStopped to registrations for a later round;
// Register retries them until the next server takes the address.
//
// Errors returned by handlers travel as text and become the same sentinel
// (ErrConflict, ErrAborted, ErrBadRequest, ErrStopped) on the client.
//
// # Liveness and abort
//
// gorpc has no server push, so a rank learns about the launcher by
// polling: Client.Watch pings every interval and calls its onLost function
// once when the server has not answered for a grace period (the launcher
// died) or when Server.Abort was called (every later and every blocked call
// then fails with ErrAborted and the launcher's reason).
//
// # Goroutines
//
// Server.Start and Dial each create one owner goroutine, the only one
// that calls gorpc's Start and Stop (gorpc races otherwise). Server.Stop
// and Client.Close return when their goroutines are gone.
package rendezvous
