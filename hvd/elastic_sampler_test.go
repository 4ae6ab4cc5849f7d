package hvd_test

import (
	"slices"
	"testing"

	"github.com/gorovod/gorovod/hvd"
)

// TestElasticSamplerLayout: in a job of fixed size the sampler deals the
// same batches as ShuffledShard and Batch (mid-epoch, where no rank runs
// short), and the same order on every rank.
func TestElasticSamplerLayout(t *testing.T) {
	const n, size, batch, seed, epoch = 120, 3, 4, 7, 2
	s, err := hvd.NewElasticSampler(n, batch, seed, true)
	if err != nil {
		t.Fatal(err)
	}
	s.Epoch = epoch
	steps := s.StepsLeft(size)
	if steps != 10 {
		t.Fatalf("StepsLeft(%d) = %d, want 10", size, steps)
	}
	for j := range steps {
		for r := range size {
			want := hvd.Batch(hvd.ShuffledShard(n, size, r, seed, epoch), n/size, batch, j)
			if got := s.Batch(r, size); !slices.Equal(got, want) {
				t.Fatalf("step %d rank %d: %v, want %v", j, r, got, want)
			}
		}
		s.Advance(size)
	}
	if s.Remaining() != 0 || s.StepsLeft(size) != 0 || len(s.Batch(0, size)) != 0 {
		t.Fatalf("after the epoch: remaining %d, steps left %d", s.Remaining(), s.StepsLeft(size))
	}
	s.NextEpoch()
	if s.Epoch != epoch+1 || s.Processed != 0 || slices.Equal(s.Batch(0, size), hvd.Batch(hvd.ShuffledShard(n, size, 0, seed, epoch), n/size, batch, 0)) {
		t.Fatalf("NextEpoch: epoch %d processed %d, or the same order again", s.Epoch, s.Processed)
	}
	if _, err := hvd.NewElasticSampler(10, 0, 0, false); err == nil {
		t.Error("batch size 0 accepted")
	}
}

// TestElasticSamplerExactlyOnce runs an epoch of 1001 samples through a
// job that commits every third step and twice loses the steps since its
// last commit and changes size (4 ranks, then 3, then 5): every sample of
// the epoch is processed exactly once by the steps that count (those
// committed), none skipped or repeated, and the rolled-back steps' samples
// are dealt out again.
func TestElasticSamplerExactlyOnce(t *testing.T) {
	const n, batch = 1001, 7
	s, err := hvd.NewElasticSampler(n, batch, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	p := hvd.NewParam("w", 1)
	sgd, err := hvd.NewSGD([]*hvd.Param{p}, hvd.SGDConfig{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := hvd.NewElasticState(sgd, s)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	var pending []int                   // samples of the steps since the last commit
	resets := map[int]int{10: 3, 23: 5} // at this step: roll back, then this many ranks
	size, step, rolledBack := 4, 0, 0
	for s.Remaining() > 0 {
		step++
		var seen []int
		for r := range size {
			b := s.Batch(r, size)
			if len(b) > batch {
				t.Fatalf("step %d rank %d: %d samples", step, r, len(b))
			}
			seen = append(seen, b...)
		}
		if len(seen) == 0 {
			t.Fatalf("step %d dealt nothing with %d remaining", step, s.Remaining())
		}
		pending = append(pending, seen...)
		s.Advance(size)
		if to, ok := resets[step]; ok {
			if err := st.Restore(); err != nil {
				t.Fatal(err)
			}
			rolledBack += len(pending)
			pending, size = nil, to
			continue
		}
		if step%3 == 0 || s.Remaining() == 0 {
			if err := st.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, i := range pending {
				counts[i]++
			}
			pending = nil
		}
	}
	for i, c := range counts {
		if c != 1 {
			t.Fatalf("sample %d processed %d times", i, c)
		}
	}
	if rolledBack == 0 || len(pending) != 0 {
		t.Fatalf("rolled back %d samples, %d left uncommitted", rolledBack, len(pending))
	}
}
