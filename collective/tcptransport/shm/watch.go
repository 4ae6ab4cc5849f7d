package shm

// Watch is the goroutine of a Link, owned by its conn and started with it;
// the conn's failure stops it, and the conn's owner waits for it (see
// Wait). It blocks reading the link's idle inbound socket. The read ends
// when the peer closes its end (it exited, crashed or closed its
// transport) or when this side fails the conn (which closes the sockets).
// A peer that went away may have left frames in the inbound ring, which
// Recv still delivers, as TCP would; the conn fails when a call finds
// nothing more (or on Close). Once it has failed and no call uses the
// rings, they are unmapped.
func (l *Link) Watch() {
	var b [1]byte
	n, _ := l.idle.Read(b[:])
	switch {
	case n > 0:
		l.c.Corrupt("unexpected bytes on the idle socket of a shared-memory link")
	case l.c.Err() == nil:
		l.gone.Store(true)
		l.wake()
		<-l.downed
	}
	l.wake()
	l.mu.Lock()
	l.out.Unmap()
	l.in.Unmap()
	l.mapped = false
	l.mu.Unlock()
	close(l.done)
}

// wake rouses every call of this process sleeping on the link's rings.
func (l *Link) wake() {
	l.in.WakeReader()
	l.out.WakeWriter()
	l.out.WakeRemote()
}
