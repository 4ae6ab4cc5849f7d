package runner

import (
	"testing"
)

// TestStrandWatch: a rank that exits 0 before registering stops the job
// once another rank has registered: at once if one has, else when the
// rendezvous changes with a registration. Only the first such rank
// counts; a rank that registered before it exited is fine, and so is
// everything while nobody registers.
func TestStrandWatch(t *testing.T) {
	const want = "runner: rank 1 on a exited with status 0 before joining the job"

	srv := newFakeServer(3)
	s := strandWatch{reg: srv}
	if err := s.left(1, "a"); err != nil || s.joins == nil {
		t.Fatalf("left with nobody registered: %v, watching %v; want nil, watching", err, s.joins != nil)
	}
	if err := s.left(2, "a"); err != nil {
		t.Errorf("a second rank that left: %v, want nil (the first one counts)", err)
	}
	joins := s.joins
	srv.register(0)
	select {
	case <-joins:
	default:
		t.Fatal("the watch missed the registration")
	}
	if err := s.check(); err == nil || err.Error() != want {
		t.Errorf("after a registration: %v, want %q", err, want)
	}

	srv = newFakeServer(3)
	srv.register(0)
	s = strandWatch{reg: srv}
	if err := s.left(0, "a"); err != nil || s.joins != nil {
		t.Errorf("a registered rank that left: %v, watching %v; want nil, not watching", err, s.joins != nil)
	}
	if err := s.left(1, "a"); err == nil || err.Error() != want {
		t.Errorf("left while a rank has registered: %v, want %q", err, want)
	}

	srv = newFakeServer(2)
	s = strandWatch{reg: srv}
	_ = s.left(1, "a")
	s.stop()
	if s.joins != nil {
		t.Error("still watching after stop")
	}
}
