package hvd

import "github.com/gorovod/gorovod/collective/engine"

// StoppedByPeerShutdown exports stoppedByPeerShutdown to the tests.
var StoppedByPeerShutdown = stoppedByPeerShutdown

// EngineErr is the cause that stopped the runtime's engine, or nil.
func (r *Runtime) EngineErr() error { return r.engine.Err() }

// EngineStats is the runtime's engine's statistics.
func (r *Runtime) EngineStats() engine.Stats { return r.engine.Stats() }

// InPlaceGrads counts the gradients o all-reduces in place.
func (o *DistributedOptimizer) InPlaceGrads() int {
	n := 0
	for _, g := range o.grads {
		if g.inPlace && g.wire == nil {
			n++
		}
	}
	return n
}

// MachineOf is every rank's machine as this runtime learnt it from the
// rendezvous (nil for a given transport).
func (r *Runtime) MachineOf() []string { return r.machineOf }
