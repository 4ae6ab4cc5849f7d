package collective

import "sync"

// progress counts completed steps of one direction (sends or receives) of a
// running plan. Steps of a direction complete in order, so "step i is done"
// is "done > i". abort wakes every waiter for good.
type progress struct {
	mu      sync.Mutex
	cond    sync.Cond
	done    int
	aborted bool
}

func (p *progress) init() { p.cond.L = &p.mu }

// complete records that every step up to and including i is done.
func (p *progress) complete(i int) {
	p.mu.Lock()
	p.done = i + 1
	p.mu.Unlock()
	p.cond.Broadcast()
}

// wait blocks until step i is done (true) or the run is aborted (false).
// A negative i means "nothing to wait for".
func (p *progress) wait(i int) bool {
	if i < 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.done <= i && !p.aborted {
		p.cond.Wait()
	}
	return !p.aborted
}

func (p *progress) abort() {
	p.mu.Lock()
	p.aborted = true
	p.mu.Unlock()
	p.cond.Broadcast()
}
