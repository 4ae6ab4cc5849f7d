package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// side is the width and height of a Fashion-MNIST image; classes the
// number of labels.
const side, classes = 28, 10

// set is a set of images (side×side bytes each, row-major) and labels.
type set struct {
	images []byte
	labels []byte
}

// len is the number of examples.
func (s set) len() int { return len(s.labels) }

// limit keeps the first n examples (all when n <= 0 or n is larger).
func (s set) limit(n int) set {
	if n <= 0 || n >= s.len() {
		return s
	}
	return set{s.images[:n*side*side], s.labels[:n]}
}

// loadFashion reads the train and test sets from dir (IDX files, gzipped).
func loadFashion(dir string) (train, test set, err error) {
	if train, err = loadSet(dir, "train"); err != nil {
		return
	}
	test, err = loadSet(dir, "t10k")
	return
}

// loadSet reads prefix-images-idx3-ubyte.gz and prefix-labels-idx1-ubyte.gz.
func loadSet(dir, prefix string) (set, error) {
	imgDims, images, err := readIDX(filepath.Join(dir, prefix+"-images-idx3-ubyte.gz"))
	if err != nil {
		return set{}, err
	}
	lblDims, labels, err := readIDX(filepath.Join(dir, prefix+"-labels-idx1-ubyte.gz"))
	if err != nil {
		return set{}, err
	}
	if len(imgDims) != 3 || imgDims[1] != side || imgDims[2] != side || len(lblDims) != 1 || lblDims[0] != imgDims[0] {
		return set{}, fmt.Errorf("%s: images %v and labels %v are not Fashion-MNIST's shapes", prefix, imgDims, lblDims)
	}
	for i, l := range labels {
		if l >= classes {
			return set{}, fmt.Errorf("%s: label %d of example %d is not below %d", prefix, l, i, classes)
		}
	}
	return set{images, labels}, nil
}

// readIDX reads a gzipped IDX file of unsigned bytes: zero, zero, 0x08,
// the number of dimensions, each dimension as a big-endian uint32, then
// the bytes.
func readIDX(path string) ([]int, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	defer gz.Close()
	var magic [4]byte
	if _, err := io.ReadFull(gz, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 {
		return nil, nil, fmt.Errorf("%s: magic % x is not an unsigned-byte IDX file", path, magic)
	}
	dims := make([]int, magic[3])
	n := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(gz, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		dims[i] = int(d)
		if n *= dims[i]; n > 1<<30 {
			return nil, nil, fmt.Errorf("%s: dimensions %v are too large", path, dims[:i+1])
		}
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(gz, data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, data, nil
}

// synthetic makes n labelled images, the same for a given seed: class c is
// a bright horizontal bar at row 2+2c and a vertical one at column 27-2c,
// over noise, so that a small CNN can learn them but not at once.
func synthetic(n int, seed uint64) set {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	s := set{make([]byte, n*side*side), make([]byte, n)}
	for i := range n {
		c := r.IntN(classes)
		s.labels[i] = byte(c)
		img := s.images[i*side*side : (i+1)*side*side]
		for p := range img {
			img[p] = byte(r.IntN(120))
		}
		row, col := 2+2*c+r.IntN(3)-1, side-1-2*c+r.IntN(3)-1
		for k := range side {
			if row >= 0 && row < side {
				img[row*side+k] = byte(150 + r.IntN(100))
			}
			if col >= 0 && col < side {
				img[k*side+col] = byte(150 + r.IntN(100))
			}
		}
	}
	return s
}
