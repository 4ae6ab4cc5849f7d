package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

const (
	side    = 28
	pixels  = side * side
	classes = 10
)

// dataset holds images as rows of pixels in [0, 1] and their labels.
type dataset struct {
	X      []float32 // n × pixels, row-major
	Labels []uint8
}

func (d *dataset) len() int { return len(d.Labels) }

// limit keeps the first n images (all of them when n is 0 or more than
// there are).
func (d *dataset) limit(n int) {
	if n > 0 && n < d.len() {
		d.X, d.Labels = d.X[:n*pixels], d.Labels[:n]
	}
}

// readIDX reads a gzipped IDX file of unsigned bytes (the MNIST format: two
// zero bytes, the type 0x08, the number of dimensions, each dimension as a
// big-endian uint32, then the bytes).
func readIDX(path string) (dims []int, data []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var magic [4]byte
	if _, err := io.ReadFull(zr, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4 {
		return nil, nil, fmt.Errorf("%s: magic % x is not an unsigned-byte IDX file", path, magic)
	}
	n := 1
	for range int(magic[3]) {
		var d uint32
		if err := binary.Read(zr, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		dims = append(dims, int(d))
		if n *= int(d); n > 1<<30 {
			return nil, nil, fmt.Errorf("%s: dimensions %v are too large", path, dims)
		}
	}
	data = make([]byte, n)
	if _, err := io.ReadFull(zr, data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, data, nil
}

// loadSplit reads split ("train" or "t10k") of Fashion-MNIST from dir.
func loadSplit(dir, split string) (*dataset, error) {
	idims, pix, err := readIDX(filepath.Join(dir, split+"-images-idx3-ubyte.gz"))
	if err != nil {
		return nil, err
	}
	ldims, labels, err := readIDX(filepath.Join(dir, split+"-labels-idx1-ubyte.gz"))
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
	d := &dataset{X: make([]float32, len(pix)), Labels: labels}
	for i, p := range pix {
		d.X[i] = float32(p) / 255
	}
	return d, nil
}

// loadData loads Fashion-MNIST from dir or, when dir has none of it, a
// synthetic set of synthTrain and synthTest images of the same shape; the
// note says which.
func loadData(dir string, synthTrain, synthTest int, seed uint64) (train, test *dataset, note string, err error) {
	train, err = loadSplit(dir, "train")
	if err == nil {
		test, err = loadSplit(dir, "t10k")
	}
	if err == nil {
		return train, test, "Fashion-MNIST from " + dir, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, "", err
	}
	train, test = synthetic(synthTrain, synthTest, seed)
	return train, test, fmt.Sprintf("Fashion-MNIST is not in %s (apt-get install dataset-fashion-mnist): using a SYNTHETIC set", dir), nil
}

// synthetic makes 28×28 images of ten classes, each class a few bright
// discs at random places, each image its class's discs at a random
// brightness plus pixel noise. Every rank makes the same set.
func synthetic(nTrain, nTest int, seed uint64) (train, test *dataset) {
	rng := rand.New(rand.NewPCG(seed, 0xfa5))
	protos := make([][]float32, classes)
	for c := range protos {
		img := make([]float32, pixels)
		for range 3 {
			cy, cx, r := rng.Float64()*side, rng.Float64()*side, 2+4*rng.Float64()
			for y := range side {
				for x := range side {
					if dy, dx := float64(y)-cy, float64(x)-cx; dy*dy+dx*dx < r*r {
						img[y*side+x] = 1
					}
				}
			}
		}
		protos[c] = img
	}
	gen := func(n int) *dataset {
		d := &dataset{X: make([]float32, n*pixels), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(classes)
			d.Labels[i] = uint8(c)
			gain := 0.6 + 0.8*rng.Float64()
			for p, v := range protos[c] {
				d.X[i*pixels+p] = float32(min(1, max(0, gain*float64(v)+0.35*rng.NormFloat64())))
			}
		}
		return d
	}
	return gen(nTrain), gen(nTest)
}
