package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
)

// dataset holds images as rows of pixels in [0, 1] and their labels.
type dataset struct {
	X      []float64 // n × pixels, row-major
	Labels []uint8
	Pixels int
}

func (d *dataset) len() int { return len(d.Labels) }

// gather copies the rows of idx into a batch matrix and their labels.
func (d *dataset) gather(idx []int, x *mat, labels []uint8) {
	x.reshape(len(idx), d.Pixels)
	for i, j := range idx {
		copy(x.d[i*d.Pixels:(i+1)*d.Pixels], d.X[j*d.Pixels:(j+1)*d.Pixels])
		labels[i] = d.Labels[j]
	}
}

const (
	side    = 28
	classes = 10
)

// loadFashionMNIST reads the training and test sets from dir (Debian's
// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist).
func loadFashionMNIST(dir string) (train, test *dataset, err error) {
	if train, err = loadSplit(dir, "train"); err != nil {
		return nil, nil, err
	}
	if test, err = loadSplit(dir, "t10k"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadSplit(dir, split string) (*dataset, error) {
	idims, pix, err := readIDXFile(filepath.Join(dir, split+"-images-idx3-ubyte"))
	if err != nil {
		return nil, err
	}
	ldims, labels, err := readIDXFile(filepath.Join(dir, split+"-labels-idx1-ubyte"))
	if err != nil {
		return nil, err
	}
	if len(idims) != 3 || idims[1] != side || idims[2] != side || len(ldims) != 1 || ldims[0] != idims[0] {
		return nil, fmt.Errorf("%s: images %v and labels %v do not match", split, idims, ldims)
	}
	for _, l := range labels {
		if l >= classes {
			return nil, fmt.Errorf("%s: label %d out of range", split, l)
		}
	}
	d := &dataset{X: make([]float64, len(pix)), Labels: labels, Pixels: side * side}
	for i, p := range pix {
		d.X[i] = float64(p) / 255
	}
	return d, nil
}

// first is the set of d's first n images (all of them when n is 0 or
// more than d has).
func (d *dataset) first(n int) *dataset {
	if n <= 0 || n >= d.len() {
		return d
	}
	return &dataset{X: d.X[:n*d.Pixels], Labels: d.Labels[:n], Pixels: d.Pixels}
}

// loadData loads Fashion-MNIST, or, when dir has none of it, a synthetic
// set of the same shape; the note says which.
func loadData(dir string, synthTrain, synthTest int, seed uint64) (train, test *dataset, note string, err error) {
	train, test, err = loadFashionMNIST(dir)
	if err == nil {
		return train, test, fmt.Sprintf("Fashion-MNIST from %s: %d training and %d test images", dir, train.len(), test.len()), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, "", err
	}
	train, test = synthetic(synthTrain, synthTest, seed)
	note = fmt.Sprintf("Fashion-MNIST is not in %s (apt-get install dataset-fashion-mnist): "+
		"using a SYNTHETIC set of %d training and %d test images instead", dir, train.len(), test.len())
	return train, test, note, nil
}

// synthetic makes 28×28 images of ten classes: each class is a random
// pattern of a few bright blobs; each image is its class's pattern at a
// random brightness plus pixel noise. Every rank makes the same set.
func synthetic(nTrain, nTest int, seed uint64) (train, test *dataset) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	protos := make([][]float64, classes)
	for c := range protos {
		protos[c] = blobs(rng)
	}
	make1 := func(n int) *dataset {
		d := &dataset{X: make([]float64, n*side*side), Labels: make([]uint8, n), Pixels: side * side}
		for i := range n {
			c := rng.IntN(classes)
			d.Labels[i] = uint8(c)
			gain := 0.6 + 0.8*rng.Float64()
			for p, v := range protos[c] {
				d.X[i*d.Pixels+p] = min(1, max(0, gain*v+0.35*rng.NormFloat64()))
			}
		}
		return d
	}
	return make1(nTrain), make1(nTest)
}

func blobs(rng *rand.Rand) []float64 {
	img := make([]float64, side*side)
	for range 3 {
		cy, cx, r := rng.Float64()*side, rng.Float64()*side, 2+4*rng.Float64()
		for y := range side {
			for x := range side {
				dy, dx := float64(y)-cy, float64(x)-cx
				if dy*dy+dx*dx < r*r {
					img[y*side+x] = 1
				}
			}
		}
	}
	return img
}
