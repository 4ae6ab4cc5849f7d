package rendezvous

import "sync"

// gate admits goroutines (handlers, calls, watchers) until it is shut, and
// lets the owner wait for those admitted. Unlike a bare WaitGroup it never
// lets Add race with Wait: after shut, enter refuses.
type gate struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter admits one goroutine; it returns false once the gate is shut.
// Every successful enter must be paired with leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// leave marks an admitted goroutine as finished.
func (g *gate) leave() { g.wg.Done() }

// shut refuses later enters; it does not wait.
func (g *gate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// wait blocks until every admitted goroutine has left; call after shut.
func (g *gate) wait() { g.wg.Wait() }
