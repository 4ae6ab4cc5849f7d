package tcptransport

import "github.com/gorovod/gorovod/collective"

// Path is the way one link of a transport carries its frames.
type Path int

const (
	// NoLink: there is no such link (the rank itself, a peer out of range,
	// or a transport that this package did not make).
	NoLink Path = iota
	// TCP: frames travel over the link's sockets.
	TCP
	// SharedMemory: frames travel through a ring per direction in shared
	// memory; the sockets only tell either side when the other goes away.
	SharedMemory
)

// String returns "tcp", "shm" or "none".
func (p Path) String() string {
	switch p {
	case TCP:
		return "tcp"
	case SharedMemory:
		return "shm"
	}
	return "none"
}

// LinkPath reports which path t's link to peer took when it formed (it
// does not change afterwards); NoLink for a link that forms on demand and
// has not formed yet. Tests use it to check that a variant meant to cover
// TCP or shared memory really does; a launcher may log it.
func LinkPath(t collective.Transport, peer int) Path {
	tr, ok := t.(*transport)
	if !ok || peer < 0 || peer >= tr.size || tr.slots[peer] == nil {
		return NoLink
	}
	c := tr.slots[peer].formed.Load()
	if c == nil {
		return NoLink
	}
	return pathOf(c)
}
