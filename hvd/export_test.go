package hvd

// SetStageChunk sets the staging span size of device tensors for a
// benchmark and returns the function that restores it.
func SetStageChunk(n int) (restore func()) {
	old := stageChunk
	stageChunk = n
	return func() { stageChunk = old }
}
