package hvd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gorovod/gorovod/rendezvous"
)

// StallEvent is the kind of the event that a runtime sends to gorun (for
// its dashboard and --metrics-dir) when its engine warns of a stall.
const StallEvent = "stall"

// stallMessages start the engine's stall warnings: rank 0's "stalled
// tensors" (collective/engine/stall.go) and any rank's "negotiation is
// waiting" (collective/engine/watchdog.go). TestStallWarningIsAnEvent
// fails if they change.
var stallMessages = []string{"engine: stalled tensors", "engine: negotiation is waiting"}

// stallEvents is the engine's log handler: it passes every record to
// the runtime's handler and sends the stall warnings to gorun as events
// too, whatever the log level.
type stallEvents struct {
	slog.Handler
	pub   *publisher
	attrs []slog.Attr // from WithAttrs, for the event's text
}

// stallLogger is the engine's logger of a runtime logging to log.
func stallLogger(log *slog.Logger, pub *publisher) *slog.Logger {
	return slog.New(&stallEvents{Handler: log.Handler(), pub: pub})
}

// Enabled is true where the runtime's handler logs level, and for
// warnings while gorun takes events.
func (h *stallEvents) Enabled(ctx context.Context, level slog.Level) bool {
	return h.Handler.Enabled(ctx, level) || level >= slog.LevelWarn && !h.pub.deaf.Load()
}

// Handle sends a stall warning to gorun and passes rec on.
func (h *stallEvents) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn && isStallMessage(rec.Message) {
		var b strings.Builder
		b.WriteString(rec.Message)
		write := func(a slog.Attr) bool {
			fmt.Fprintf(&b, "; %s: %v", a.Key, a.Value)
			return true
		}
		for _, a := range h.attrs {
			write(a)
		}
		rec.Attrs(write)
		h.pub.event(StallEvent, b.String())
	}
	if !h.Handler.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, rec)
}

// WithAttrs keeps the stall events of the handler with attrs.
func (h *stallEvents) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &stallEvents{Handler: h.Handler.WithAttrs(attrs), pub: h.pub, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], attrs...)}
}

// WithGroup keeps the stall events of the handler in the group.
func (h *stallEvents) WithGroup(name string) slog.Handler {
	return &stallEvents{Handler: h.Handler.WithGroup(name), pub: h.pub, attrs: h.attrs}
}

func isStallMessage(msg string) bool {
	for _, m := range stallMessages {
		if strings.HasPrefix(msg, m) {
			return true
		}
	}
	return false
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
	kept := len(p.buf) < ScalarBuffer
	if kept {
		p.buf = append(p.buf, rendezvous.MetricPoint{Step: p.step, Time: time.Now().UnixNano(), Name: kind, Text: text})
	}
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
