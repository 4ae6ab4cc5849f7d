package hvd

// SetMaxObjectBytes lowers AllgatherObject's bound for a test and returns
// the function that restores it.
func SetMaxObjectBytes(n int) (restore func()) {
	old := maxObjectBytes
	maxObjectBytes = n
	return func() { maxObjectBytes = old }
}
