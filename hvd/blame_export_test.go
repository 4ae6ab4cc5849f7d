package hvd

// StoppedByPeerShutdown exports stoppedByPeerShutdown to the tests.
var StoppedByPeerShutdown = stoppedByPeerShutdown

// EngineErr is the cause that stopped the runtime's engine, or nil.
func (r *Runtime) EngineErr() error { return r.engine.Err() }
