package hvd

// Settle waits for the background copy of s's last Commit.
func (s *ElasticState) Settle() { s.settle() }
