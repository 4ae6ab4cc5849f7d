package hvd

// Settle waits for the background copy of s's last Commit.
func (s *ElasticState) Settle() { s.settle() }

// Attach binds s to rt, as RunElastic does for each formation.
func (s *ElasticState) Attach(rt *Runtime) { s.attach(rt, nil) }
