package main

import (
	"testing"
)

// TestCompressedTrainingKeepsAccuracy: the MLP trained on a tenth of
// Fashion-MNIST (6000 training and 2000 test images, 5 epochs with the
// program's default schedule, 2 ranks) with its weight gradients sent as
// PowerSGD factors of rank 4, or as their top 1% (with momentum
// correction), ends within one point of test accuracy of the same run
// with gradients sent whole: about 10 s without the race detector. Under
// it (~20× slower; test.sh runs this test again without it), and without
// the data set installed, the runs are testConfig's small synthetic set,
// where all three reach about 100%.
func TestCompressedTrainingKeepsAccuracy(t *testing.T) {
	cfg := testConfig(t)
	if !raceEnabled {
		cfg.DataDir = "/usr/share/datasets/fashion-mnist"
		cfg.LimitTrain, cfg.LimitTest, cfg.Hidden, cfg.Epochs = 6000, 2000, 64, 5
		cfg.LR, cfg.Milestones, cfg.Gamma = 0.01, []float64{3, 4}, 0.2
	}
	base := trainJob(t, 2, cfg)
	want := base.Epochs[len(base.Epochs)-1].Accuracy
	for _, c := range []struct {
		name     string
		powerSGD int
		topK     float64
	}{{"powersgd 4", 4, 0}, {"top 1%", 0, 0.01}} {
		cfg := cfg
		cfg.PowerSGD, cfg.TopK = c.powerSGD, c.topK
		s := trainJob(t, 2, cfg)
		got := s.Epochs[len(s.Epochs)-1].Accuracy
		t.Logf("%s: test accuracy %.4f, uncompressed %.4f", c.name, got, want)
		if got < want-0.01 {
			t.Errorf("%s: test accuracy %.4f, more than a point below the uncompressed %.4f", c.name, got, want)
		}
	}
}
