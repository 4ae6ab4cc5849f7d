package hvd

// CrashProcessSet fails this rank's communicator of ps with cause, as if
// the rank had died as far as the set's links go.
func CrashProcessSet(ps *ProcessSet, cause error) { ps.view.comm.Abort(cause) }
