package hvd

// Learning-rate schedules are pure functions of training progress, given
// as a fractional epoch (see Progress), so every rank computes the same
// rate without communicating.

// Progress is the fractional epoch after step steps of epoch (both counted
// from 0), with stepsPerEpoch steps to an epoch.
func Progress(epoch, step, stepsPerEpoch int) float64 {
	if stepsPerEpoch <= 0 {
		return float64(epoch)
	}
	return float64(epoch) + float64(step)/float64(stepsPerEpoch)
}

// WarmupLR is the learning rate at the fractional epoch of a linear
// warm-up from base, a single rank's rate, to base·size, the rate for a
// size times larger global batch (Goyal et al., "Accurate, Large Minibatch
// SGD"): base·(1 + (size−1)·epoch/warmupEpochs) during the first
// warmupEpochs, base·size after them.
func WarmupLR(base float64, size int, warmupEpochs, epoch float64) float64 {
	peak := base * float64(size)
	if warmupEpochs <= 0 || epoch >= warmupEpochs {
		return peak
	}
	if epoch < 0 {
		epoch = 0
	}
	return base * (1 + float64(size-1)*epoch/warmupEpochs)
}

// StepDecayLR is lr multiplied by gamma once for every milestone epoch
// that epoch has reached.
func StepDecayLR(lr float64, milestones []float64, gamma, epoch float64) float64 {
	for _, m := range milestones {
		if epoch >= m {
			lr *= gamma
		}
	}
	return lr
}

// LRSchedule is a warm-up followed by step decay: the rate a training loop
// sets at every step with opt.SetLR(s.At(Progress(epoch, step, n))).
type LRSchedule struct {
	// Base is the learning rate of a single rank.
	Base float64
	// Size is the number of ranks; the rate after warm-up is Base·Size.
	Size int
	// WarmupEpochs is the length of the warm-up; 0 starts at Base·Size.
	WarmupEpochs float64
	// Milestones are the epochs at which the rate is multiplied by Gamma.
	Milestones []float64
	// Gamma is the decay factor at each milestone.
	Gamma float64
}

// At is the learning rate at the fractional epoch.
func (s LRSchedule) At(epoch float64) float64 {
	size := max(s.Size, 1)
	return StepDecayLR(WarmupLR(s.Base, size, s.WarmupEpochs, epoch), s.Milestones, s.Gamma, epoch)
}
