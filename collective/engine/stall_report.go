package engine

import (
	"fmt"
	"strings"
)

// StallKind says which stall warning a Stall is.
type StallKind string

// The stall warnings an Engine passes to Config.OnStall.
const (
	// StallTensors: some ranks submitted tensors that others have not
	// (rank 0's stall inspector, every StallWarning while it lasts).
	StallTensors StallKind = "stalled tensors"
	// StallShutdown: the stalled tensors waited the stall shutdown time
	// (or OpTimeout) and the job stops (rank 0).
	StallShutdown StallKind = "stall shutdown"
	// StallWaiting: a negotiation exchange has waited StallWarning for
	// ranks that submitted nothing or are stopped (any rank, once per
	// exchange).
	StallWaiting StallKind = "negotiation waiting"
)

// Stall is a stall warning, as Config.OnStall receives it.
type Stall struct {
	Kind StallKind
	// Text is the logged message with its attributes ("; key: value"
	// each), as one line.
	Text string
}

// stalled passes a stall warning of kind, logged as msg with args
// (key, value pairs), to Config.OnStall.
func (e *Engine) stalled(kind StallKind, msg string, args []any) {
	if e.cfg.OnStall == nil {
		return
	}
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, "; %v: %v", args[i], args[i+1])
	}
	e.cfg.OnStall(Stall{Kind: kind, Text: b.String()})
}
