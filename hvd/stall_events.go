package hvd

import (
	"strings"

	"github.com/gorovod/gorovod/collective/engine"
	"github.com/gorovod/gorovod/rendezvous"
)

// StallEvent is the kind of the event that a runtime sends to gorun (for
// its dashboard and --metrics-dir) when its engine warns of a stall.
const StallEvent = "stall"

// stallEvent is the engine's Config.OnStall of a runtime publishing
// with pub: each stall warning (whatever the log level) goes to gorun as
// an event of kind StallEvent, its text the warning with its attributes.
func stallEvent(pub *publisher) func(engine.Stall) {
	return func(s engine.Stall) { pub.event(StallEvent, s.Text) }
}

// event buffers an event of kind (see rendezvous.MetricPoint.Text) at
// the latest step and has it sent at once; like a point, it is dropped
// and counted when the buffer is full or nobody listens.
func (p *publisher) event(kind, text string) {
	if p == nil {
		return
	}
	if p.deaf.Load() {
		p.dropped.Add(1)
		return
	}
	if len(text) > rendezvous.MaxEventText {
		text = strings.ToValidUTF8(text[:rendezvous.MaxEventText-len("…")], "") + "…"
	}
	p.mu.Lock()
	kept := p.buf.Add(rendezvous.MetricPoint{Step: p.step, Time: p.now().UnixNano(), Name: kind, Text: text})
	p.mu.Unlock()
	if !kept {
		p.dropped.Add(1)
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
