package hvd

// Settle waits for the background copy of s's last Commit.
func (s *ElasticState) Settle() { s.settle() }

// Attach binds s (its optimizer) to rt, as RunElastic does for each new
// formation of the job.
func (s *ElasticState) Attach(rt *Runtime) { s.attach(rt, nil) }
