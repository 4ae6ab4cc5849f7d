package engine

import "testing"

// TestDoneClosedOnceFinished: once an operation is final (what Wait
// returns on), Done is closed, also in the moment before finish closes a
// channel that an earlier Done call made. A caller that had Wait return
// and then looked at Done without blocking used to find it open, and took
// the operation for unfinished (hvd's Handle.Output gave nil: the sharded
// optimizer's reduce-scatter then failed on one rank, which hung the job).
func TestDoneClosedOnceFinished(t *testing.T) {
	h := newHandle("x")
	early := h.Done()
	h.fin.Store(true) // finish has made the outcome final, and not yet closed early
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open although the operation is final")
	}
	h.finish(nil, nil, nil)
	select {
	case <-early:
	default:
		t.Fatal("finish did not close the channel an earlier Done made")
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open after finish")
	}
}
