package collective

// Runs returns how many operations c has executed inline and pipelined.
func Runs(c *Comm) (inline, pipelined int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[0], c.runs[1]
}
