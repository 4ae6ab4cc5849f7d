package hvd

import (
	"fmt"
	"math/rand/v2"
)

// ElasticSampler deals the samples of an epoch out to the ranks of a job
// whose size may change between steps (an elastic job), so that within an
// epoch every sample is processed exactly once whatever the resets: it
// remembers how many samples of the epoch's order the whole job has
// processed, and after a reset the ranks of the new job share only the
// rest.
//
// The order of an epoch is a permutation of [0, N) drawn from Seed and the
// epoch (the identity without Shuffle), the same on every rank. In every
// step each of the size ranks takes BatchSize samples, strided: rank r
// takes the unprocessed samples at positions r, r+size, r+2·size, ... of
// the rest of the order, so that after the step the first size·BatchSize
// of them are processed, whichever ranks processed them (Shard and Batch
// lay a fixed-size job out the same way). The last step of an epoch takes
// what is left: its batches may be smaller, differ between ranks, or be
// empty, and no sample is dropped or repeated.
//
// The exported fields are its state: keep the sampler among the fields of
// an ElasticState, so that Commit saves the progress with the model and
// Restore and Sync bring it back with it. Call Advance once per step on
// every rank, after the step's update, with the job size the step ran at.
type ElasticSampler struct {
	// N is the number of samples; BatchSize how many each rank takes per
	// step.
	N, BatchSize int
	// Seed and Shuffle choose each epoch's order.
	Seed    uint64
	Shuffle bool
	// Epoch is the epoch in progress.
	Epoch int
	// Processed counts the samples of Epoch's order that the whole job has
	// processed (a prefix of the order).
	Processed int

	order      []int // Epoch's order, or nil
	orderEpoch int
}

// NewElasticSampler returns a sampler of n samples in batches of batchSize
// per rank, at the start of epoch 0.
func NewElasticSampler(n, batchSize int, seed uint64, shuffle bool) (*ElasticSampler, error) {
	if n < 0 || batchSize <= 0 {
		return nil, invalidArgument(fmt.Errorf("hvd: an elastic sampler needs n >= 0 samples and a batch size > 0, got %d and %d", n, batchSize))
	}
	return &ElasticSampler{N: n, BatchSize: batchSize, Seed: seed, Shuffle: shuffle}, nil
}

// epochOrder returns the order of the epoch in progress.
func (s *ElasticSampler) epochOrder() []int {
	if s.order == nil || s.orderEpoch != s.Epoch || len(s.order) != s.N {
		s.order = identity(s.N)
		if s.Shuffle {
			r := rand.New(rand.NewPCG(s.Seed, uint64(s.Epoch)))
			r.Shuffle(s.N, func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
		}
		s.orderEpoch = s.Epoch
	}
	return s.order
}

// Remaining is the number of samples of the epoch not processed yet.
func (s *ElasticSampler) Remaining() int { return max(0, s.N-s.Processed) }

// StepsLeft is the number of steps a job of size ranks needs to finish
// the epoch; it is the same on every rank.
func (s *ElasticSampler) StepsLeft(size int) int {
	if size <= 0 {
		return 0
	}
	per := size * s.BatchSize
	return (s.Remaining() + per - 1) / per
}

// Batch returns the sample indices rank (of size ranks) processes in the
// next step: at most BatchSize, fewer (or none) in the epoch's last step.
func (s *ElasticSampler) Batch(rank, size int) []int {
	if size <= 0 || rank < 0 || rank >= size {
		return nil
	}
	order := s.epochOrder()
	out := make([]int, 0, s.BatchSize)
	for i := range s.BatchSize {
		at := s.Processed + rank + i*size
		if at >= s.N {
			break
		}
		out = append(out, order[at])
	}
	return out
}

// Advance records that every rank of a job of size ranks has processed
// its Batch of the step.
func (s *ElasticSampler) Advance(size int) {
	s.Processed = min(s.N, s.Processed+max(size, 0)*s.BatchSize)
}

// NextEpoch starts the next epoch, from its first sample.
func (s *ElasticSampler) NextEpoch() {
	s.Epoch++
	s.Processed = 0
}
