// Package shmring is a single-producer, single-consumer byte ring in shared
// memory between two processes on one host.
//
// One process creates a ring (Create) and offers it to the other, which
// maps it (Open); from then on one side writes bytes into it and the other
// reads them out, in order, with no system call while neither has to wait.
// The package knows nothing of frames, ranks or sockets: how the offer
// travels, and how either side learns that the other has gone, is the
// caller's business.
//
// # Memory file
//
// A ring lives in an anonymous memory file (memfd_create(2)) that never has
// a name in any directory, so no kill at any moment can leave one behind
// (in /dev/shm or anywhere else): the memory is freed with the last
// descriptor or mapping of it. It counts against the creating process's
// memory (its cgroup's limit), not against the size of /dev/shm, which a
// container may keep small. Create makes the file private to its user,
// reserves its pages (fallocate(2)), so that memory that runs short fails
// Create instead of killing a process with SIGBUS later, and seals its size,
// so neither side can shrink it under the other's mapping. A random token
// in the file's first page proves that the peer opened the right file.
//
// The offer names the file as "/proc/<pid>/fd/<fd>" (OfferPath), the
// descriptor in the creating process, which keeps it open until the peer
// has answered. The peer opens that path, which the kernel allows only to a
// process of the same user on the same host in the same pid namespace;
// Open checks that it is a ring-sized file whose size is sealed, maps it and
// checks the token. (Passing the descriptor with SCM_RIGHTS instead would
// need a Unix socket between the two processes.) memfd_create is known on
// amd64 and arm64; elsewhere Create fails and the caller keeps to another
// path.
//
// # Waiting
//
// The two sides meet on four counters in the file's first page. A reader
// with nothing to read first polls for a while (busy, or yielding the
// processor to other processes, as its caller says) and then sleeps in
// futex(2) on a counter the writer bumps after each publication; a writer
// with no room sleeps on the reader's. Every sleep lasts at most ringNap,
// after which the caller's stop function is asked whether to give up, so a
// peer that dies while the other sleeps is noticed by the caller's own
// means. WakeReader and WakeWriter rouse this process's sleepers at once.
//
// # Copies
//
// A writer copies a run of at least 16 KiB into the ring either with copy
// or, on amd64, with non-temporal stores, which send the lines to memory
// without first taking them back from the reader's cache. Which is faster
// depends on whether the two processors share a cache, which a virtual
// machine can change under a running process, so each writer times a
// sample of its runs both ways and keeps to the faster (see filler).
// Shorter runs, other architectures and builds tagged noasm, safe or gccgo
// copy as copy does. The reader copies out with copy.
package shmring
