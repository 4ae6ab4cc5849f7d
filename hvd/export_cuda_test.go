//go:build cuda

package hvd

// SetStageChunk sets the most bytes of a device tensor that this runtime
// stages through host memory at a time (stageChunk unless set), so that
// benchmarks can compare span sizes. n <= 0 restores the default.
func (r *Runtime) SetStageChunk(n int) {
	r.dev.mu.Lock()
	defer r.dev.mu.Unlock()
	r.dev.chunk = max(n, 0)
}
